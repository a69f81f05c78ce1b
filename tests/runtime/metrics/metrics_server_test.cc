// `capsule-runtime metrics serve`'s two halves for real: MetricsServer (the
// collector side, in this process) spawning the built capsule-runtime's
// `metrics http-front`, spoken to over TCP on loopback. The collection is
// this test's (the CRI e2e scrapes the node's real one).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/common/unique_fd.h"
#include "runtime/metrics/metrics_server.h"
#include "tests/support/status_matchers.h"

namespace capsule::metrics {
namespace {

using std::chrono::milliseconds;

std::string Cli() { return std::string(std::getenv("CAPSULE_BUILD_DIR")) + "/runtime/cli/capsule-runtime"; }

UniqueFd Connect(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return UniqueFd();
  return fd;
}

// Everything the server says until it closes (or 20 s pass).
std::string ReadToEnd(int fd) {
  std::string all;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  return all;
}

std::string Exchange(int port, const std::string& request) {
  UniqueFd fd = Connect(port);
  if (!fd) return "<connect failed>";
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()))
    return "<send failed>";
  return ReadToEnd(fd.get());
}

std::string StatusLine(const std::string& answer) { return answer.substr(0, answer.find("\r\n")); }

std::string Body(const std::string& answer) {
  const size_t end = answer.find("\r\n\r\n");
  return end == std::string::npos ? "<no head>" : answer.substr(end + 4);
}

// A field of /proc/<pid>/status, without its name.
std::string ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return line.substr(field.size() + 1);
  }
  return "";
}

long KiB(const std::string& value) { return std::strtol(value.c_str(), nullptr, 10); }

class MetricsServerTest : public ::testing::Test {
 protected:
  void Start(HttpFrontOptions http) {
    MetricsServerOptions o;
    o.front_end = {Cli(), "metrics", "http-front"};
    o.http = http;
    auto s = MetricsServer::Start(
        "127.0.0.1", 0,
        [this] { return "capsule_test_collections " + std::to_string(++collections_) + "\n"; }, o);
    ASSERT_OK(s);
    server_ = std::move(*s);
  }
  int port() const { return server_->port(); }
  std::string Get(const std::string& path = "/metrics") {
    return Exchange(port(), "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
  }

  std::atomic<int> collections_{0};
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(MetricsServerTest, AnswersGetAndHeadAndRefusesEverythingElseByName) {
  Start({});
  const std::string get = Get();
  EXPECT_EQ(StatusLine(get), "HTTP/1.1 200 OK") << get;
  EXPECT_NE(get.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << get;
  EXPECT_EQ(Body(get), "capsule_test_collections 1\n");
  const std::string head = Exchange(port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(StatusLine(head), "HTTP/1.1 200 OK") << head;
  EXPECT_NE(head.find("Content-Length: 27\r\n"), std::string::npos) << head;
  EXPECT_EQ(Body(head), "");
  const std::string post = Exchange(port(), "POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(StatusLine(post), "HTTP/1.1 405 Method Not Allowed") << post;
  EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos) << post;
  EXPECT_EQ(StatusLine(Exchange(port(), "GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")),
            "HTTP/1.1 413 Content Too Large");
  EXPECT_EQ(StatusLine(Exchange(port(), "GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")),
            "HTTP/1.1 413 Content Too Large");
  EXPECT_EQ(StatusLine(Exchange(port(), "GET /metrics HTTP/1.1\r\nX-Long: " + std::string(9000, 'a') + "\r\n\r\n")),
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(StatusLine(Get("/debug")), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(Exchange(port(), "GET /metrics HTTP/2.0\r\n\r\n")), "HTTP/1.1 505 HTTP Version Not Supported");
  EXPECT_EQ(StatusLine(Exchange(port(), "\x16\x03\x01 garbage\r\n\r\n")), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(StatusLine(Get("/")), "HTTP/1.1 200 OK");
}

TEST_F(MetricsServerTest, ARequestThatDoesNotArriveInTimeIsAnsweredOrDropped) {
  HttpFrontOptions http;
  http.request_timeout = milliseconds(300);
  Start(http);
  UniqueFd silent = Connect(port());
  UniqueFd partial = Connect(port());
  ASSERT_TRUE(silent && partial);
  ASSERT_EQ(::send(partial.get(), "GET /metr", 9, MSG_NOSIGNAL), 9);
  EXPECT_EQ(ReadToEnd(silent.get()), "");
  EXPECT_EQ(StatusLine(ReadToEnd(partial.get())), "HTTP/1.1 408 Request Timeout");
}

TEST_F(MetricsServerTest, ScrapesShareACollectionWhileItIsFresh) {
  HttpFrontOptions http;
  http.cache_for = milliseconds(600000);
  Start(http);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Body(Get()), "capsule_test_collections 1\n");
  EXPECT_EQ(collections_, 1);
  server_.reset();
  collections_ = 0;
  http.cache_for = milliseconds(0);
  Start(http);
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(Body(Get()), "capsule_test_collections " + std::to_string(i) + "\n");
  EXPECT_EQ(collections_, 3);
}

// A 100 MB body, an endless header line and 500 idle connections at once:
// the front end grows by less than 4 MiB (it buffers one bounded head per
// connection) and a scrape is still answered.
TEST_F(MetricsServerTest, AFloodLeavesTheFrontEndSmallAndMetricsAnswering) {
  Start({});
  const pid_t front = server_->front_end_pid();
  // The baseline is the front end serving, not a child still inside exec: an
  // answer (one that does not collect) comes only from the started program.
  ASSERT_EQ(StatusLine(Get("/ready")), "HTTP/1.1 404 Not Found");
  const long rss_before = KiB(ProcStatus(front, "VmRSS"));
  ASSERT_GT(rss_before, 0);
  std::atomic<bool> stop{false};
  std::atomic<long> body_sent{0}, header_sent{0};
  std::thread body([&] {
    UniqueFd fd = Connect(port());
    const std::string head = "POST /metrics HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n";
    (void)::send(fd.get(), head.data(), head.size(), MSG_NOSIGNAL);
    const std::string chunk(65536, 'b');
    while (!stop && body_sent < 100000000) {
      const ssize_t n = ::send(fd.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      body_sent += n;
    }
  });
  std::thread header([&] {
    UniqueFd fd = Connect(port());
    const std::string start = "GET /metrics HTTP/1.1\r\nX-Endless: ";
    (void)::send(fd.get(), start.data(), start.size(), MSG_NOSIGNAL);
    const std::string chunk(65536, 'h');
    while (!stop) {
      const ssize_t n = ::send(fd.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) break;
      header_sent += n;
    }
  });
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 500; ++i) {
    UniqueFd fd = Connect(port());
    ASSERT_TRUE(fd) << "connection " << i;
    idle.push_back(std::move(fd));
  }
  const std::string scrape = Get();
  EXPECT_EQ(StatusLine(scrape), "HTTP/1.1 200 OK") << scrape;
  EXPECT_EQ(Body(scrape), "capsule_test_collections 1\n");
  stop = true;
  body.join();
  header.join();
  // Both floods were cut off well before they were through.
  EXPECT_LT(body_sent, 100000000);
  EXPECT_LT(header_sent, 16 << 20);
  const long hwm = KiB(ProcStatus(front, "VmHWM"));
  EXPECT_LT(hwm, rss_before + 4 * 1024) << "front end peak RSS " << hwm << " KiB, " << rss_before << " at start";
  idle.clear();
  EXPECT_EQ(StatusLine(Get()), "HTTP/1.1 200 OK");
}

TEST_F(MetricsServerTest, TheFrontEndRunsAsNobodyAndEndsWithTheServer) {
  Start({});
  const pid_t front = server_->front_end_pid();
  const std::string uids = ProcStatus(front, "Uid");
  if (::geteuid() == 0) {
    EXPECT_EQ(uids, "\t65534\t65534\t65534\t65534") << "front end uids";
    EXPECT_EQ(ProcStatus(front, "CapEff"), "\t0000000000000000");
    EXPECT_EQ(ProcStatus(front, "NoNewPrivs"), "\t1");
  } else {
    EXPECT_EQ(uids.substr(0, uids.find('\t', 1)), "\t" + std::to_string(::geteuid()));
  }
  server_.reset();
  EXPECT_NE(::kill(front, 0), 0) << "the front end outlived its server";
}

}  // namespace
}  // namespace capsule::metrics
