// QmpClient against a scripted fake QMP server on the other end of a
// socketpair. The real QEMU peer is covered by qemu_integration_test.
#include "runtime/hypervisor/qmp_client.h"
#include "tests/support/status_matchers.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <atomic>
#include <future>
#include <thread>

namespace capsule::hypervisor {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr const char* kGreeting =
    R"({"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "test"}, "capabilities": ["oob"]}})";

// The server side: reads command lines, writes whatever the test says.
class FakeQmp {
 public:
  explicit FakeQmp(UniqueFd fd) : fd_(std::move(fd)) {}
  void Send(const std::string& text) {
    std::string data = text;
    ASSERT_EQ(::write(fd_.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }
  void SendLine(const std::string& line) { Send(line + "\r\n"); }
  json ReadCommand() {
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return json::parse(line);
      }
      char b[4096];
      ssize_t n = ::read(fd_.get(), b, sizeof b);
      if (n <= 0) return json();
      buf_.append(b, static_cast<size_t>(n));
    }
  }
  // Like ReadCommand, also taking the fd sent with the command's first
  // bytes (SCM_RIGHTS) into `received`.
  json ReadCommandWithFd(UniqueFd& received) {
    char b[4096];
    iovec iov{b, sizeof b};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n <= 0) return json();
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      received.reset(fd);
    }
    buf_.append(b, static_cast<size_t>(n));
    return ReadCommand();
  }
  void Reply(const json& cmd, const json& ret) { SendLine(json{{"return", ret}, {"id", cmd["id"]}}.dump()); }
  void Close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  std::string buf_;
};

struct Pair {
  std::unique_ptr<QmpClient> client;
  std::unique_ptr<FakeQmp> server;
};

std::pair<UniqueFd, UniqueFd> SocketPair() {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// Connects a client through the greeting + capabilities handshake.
Pair Connected() {
  auto [a, b] = SocketPair();
  auto server = std::make_unique<FakeQmp>(std::move(b));
  QmpClient::Options o;
  o.peer = "fake";
  auto fut = std::async(std::launch::async, [&, fd = std::move(a)]() mutable { return QmpClient::Open(std::move(fd), o); });
  server->SendLine(kGreeting);
  json caps = server->ReadCommand();
  EXPECT_EQ(caps["execute"], "qmp_capabilities");
  server->Reply(caps, json::object());
  auto client = fut.get();
  EXPECT_OK(client);
  return {client.ok() ? std::move(*client) : nullptr, std::move(server)};
}

TEST(QmpClientTest, ExecuteWithFdSendsTheFdWithTheCommand) {
  auto p = Connected();
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd rd(pipe_fds[0]), wr(pipe_fds[1]);
  auto fut = std::async(std::launch::async,
                        [&] { return p.client->ExecuteWithFd("getfd", json{{"fdname", "tapfd0"}}, wr.get()); });
  UniqueFd received;
  json cmd = p.server->ReadCommandWithFd(received);
  EXPECT_EQ(cmd["execute"], "getfd");
  EXPECT_EQ(cmd["arguments"]["fdname"], "tapfd0");
  ASSERT_TRUE(received.valid()) << "no fd came with the command";
  // The peer's copy is the same pipe.
  ASSERT_EQ(::write(received.get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(rd.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
  p.server->Reply(cmd, json::object());
  auto r = fut.get();
  EXPECT_OK(r);
  EXPECT_GE(::fcntl(wr.get(), F_GETFD), 0) << "the caller's fd must stay open";
}

TEST(QmpClientTest, ExecuteWithFdRefusesAClosedFd) {
  auto p = Connected();
  auto bad = p.client->ExecuteWithFd("getfd", json{{"fdname", "x"}}, -1);
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fd -1 is not an open file descriptor"), std::string::npos)
      << bad.status().ToString();
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_EQ(p.client->ExecuteWithFd("getfd", json{{"fdname", "x"}}, pipe_fds[1]).status().code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(p.client->connected());
}

TEST(QmpClientTest, HandshakeRecordsGreeting) {
  auto p = Connected();
  ASSERT_TRUE(p.client);
  EXPECT_EQ(p.client->greeting().VersionString(), "7.2.22");
  EXPECT_TRUE(p.client->connected());
}

TEST(QmpClientTest, ExecuteReturnsPayloadAndSendsArguments) {
  auto p = Connected();
  ASSERT_TRUE(p.client);
  auto fut = std::async(std::launch::async, [&] { return p.client->Execute("device_del", json{{"id", "nic0"}}); });
  json cmd = p.server->ReadCommand();
  EXPECT_EQ(cmd["execute"], "device_del");
  EXPECT_EQ(cmd["arguments"], (json{{"id", "nic0"}}));
  p.server->Reply(cmd, json{{"ok", true}});
  auto r = fut.get();
  ASSERT_OK(r);
  EXPECT_EQ((*r)["ok"], true);
}

TEST(QmpClientTest, RepliesAreMatchedById) {
  auto p = Connected();
  ASSERT_TRUE(p.client);
  auto f1 = std::async(std::launch::async, [&] { return p.client->Execute("first"); });
  json c1 = p.server->ReadCommand();
  auto f2 = std::async(std::launch::async, [&] { return p.client->Execute("second"); });
  json c2 = p.server->ReadCommand();
  EXPECT_NE(c1["id"], c2["id"]);
  // Answer in reverse order: each caller must still get its own reply.
  p.server->Reply(c2, "for-" + c2["execute"].get<std::string>());
  p.server->Reply(c1, "for-" + c1["execute"].get<std::string>());
  EXPECT_EQ(*f1.get(), "for-first");
  EXPECT_EQ(*f2.get(), "for-second");
}

TEST(QmpClientTest, EventsInterleavedWithRepliesReachSubscribersAndWaiters) {
  std::mutex mu;  // before the client: they outlive its reader thread
  std::vector<std::string> seen;
  auto p = Connected();
  ASSERT_TRUE(p.client);
  int token = p.client->Subscribe([&](const QmpEvent& e) {
    std::lock_guard lock(mu);
    seen.push_back(e.name);
  });
  auto waiter = p.client->Expect("DEVICE_DELETED", [](const json& d) { return d.value("device", "") == "nic1"; });
  auto fut = std::async(std::launch::async, [&] { return p.client->Execute("device_del", json{{"id", "nic1"}}); });
  json cmd = p.server->ReadCommand();
  p.server->SendLine(R"({"event": "DEVICE_DELETED", "data": {"device": "nic0"}, "timestamp": {"seconds": 1, "microseconds": 2}})");
  p.server->Reply(cmd, json::object());
  p.server->SendLine(R"({"event": "DEVICE_DELETED", "data": {"device": "nic1"}, "timestamp": {"seconds": 1, "microseconds": 3}})");
  ASSERT_OK(fut.get());
  auto ev = waiter->Wait(milliseconds(5000));
  ASSERT_OK(ev);
  EXPECT_EQ(ev->data["device"], "nic1");  // not the first, non-matching one
  EXPECT_EQ(ev->microseconds, 3);
  // The waiter is woken before the subscribers run: the second callback
  // may still be on its way.
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mu);
      if (seen.size() >= 2) break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  p.client->Unsubscribe(token);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"DEVICE_DELETED", "DEVICE_DELETED"}));
}

// What a subscriber captured may go once Unsubscribe returns: it waits for
// a callback that is running (the race ASan caught in the test above).
TEST(QmpClientTest, UnsubscribeWaitsForACallbackInFlight) {
  std::atomic<bool> entered{false}, done{false};
  auto p = Connected();
  ASSERT_TRUE(p.client);
  int token = p.client->Subscribe([&](const QmpEvent&) {
    entered = true;
    std::this_thread::sleep_for(milliseconds(200));
    done = true;
  });
  p.server->SendLine(R"({"event": "STOP", "timestamp": {"seconds": 1, "microseconds": 0}})");
  for (int i = 0; i < 500 && !entered; ++i) std::this_thread::sleep_for(milliseconds(2));
  ASSERT_TRUE(entered);
  p.client->Unsubscribe(token);
  EXPECT_TRUE(done) << "Unsubscribe returned while its callback still ran";
}

TEST(QmpClientTest, ErrorReplyBecomesStatusNamingTheCommand) {
  auto p = Connected();
  ASSERT_TRUE(p.client);
  auto fut = std::async(std::launch::async, [&] { return p.client->Execute("device_add", json{{"driver", "nope"}}); });
  json cmd = p.server->ReadCommand();
  p.server->SendLine(json{{"error", {{"class", "GenericError"}, {"desc", "'nope' is not a valid device model name"}}},
                          {"id", cmd["id"]}}
                         .dump());
  auto r = fut.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("QMP device_add: GenericError: 'nope' is not a valid device model name"),
            std::string::npos)
      << r.status().message();
  EXPECT_TRUE(p.client->connected());
}

TEST(QmpClientTest, TimeoutLeavesConnectionUsable) {
  auto p = Connected();
  ASSERT_TRUE(p.client);
  auto r = p.client->Execute("slow", nullptr, milliseconds(50));
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded);
  json slow = p.server->ReadCommand();
  p.server->Reply(slow, "late");  // dropped: nobody waits for it any more
  auto fut = std::async(std::launch::async, [&] { return p.client->Execute("next"); });
  json next = p.server->ReadCommand();
  p.server->Reply(next, "fresh");
  EXPECT_EQ(*fut.get(), "fresh");
}

TEST(QmpClientTest, TruncatedMessageThenCloseFailsPendingCommand) {
  auto p = Connected();
  ASSERT_TRUE(p.client);
  auto waiter = p.client->Expect("SHUTDOWN");
  auto fut = std::async(std::launch::async, [&] { return p.client->Execute("query-status"); });
  p.server->ReadCommand();
  p.server->Send(R"({"return": {"stat)");
  p.server->Close();
  auto r = fut.get();
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("peer closed mid-message"), std::string::npos) << r.status().message();
  EXPECT_TRUE(p.client->WaitClosed(milliseconds(5000)));
  EXPECT_FALSE(p.client->connected());
  EXPECT_EQ(waiter->Wait(milliseconds(1000)).status().code(), Code::kUnavailable);
  EXPECT_EQ(p.client->Execute("after").status().code(), Code::kUnavailable);
}

TEST(QmpClientTest, GarbageClosesTheConnectionWithTheReason) {
  auto p = Connected();
  ASSERT_TRUE(p.client);
  auto fut = std::async(std::launch::async, [&] { return p.client->Execute("query-status"); });
  p.server->ReadCommand();
  p.server->SendLine("this is not QMP");
  auto r = fut.get();
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("not JSON"), std::string::npos) << r.status().message();
}

TEST(QmpClientTest, HandshakeTimesOutWithoutGreeting) {
  auto [a, b] = SocketPair();
  QmpClient::Options o;
  o.handshake_timeout = milliseconds(100);
  auto c = QmpClient::Open(std::move(a), o);
  EXPECT_EQ(c.status().code(), Code::kDeadlineExceeded);
}

TEST(QmpClientTest, HandshakeAbortsWhenAbortFdFires) {
  auto [a, b] = SocketPair();
  UniqueFd ev(::eventfd(1, EFD_CLOEXEC));  // already readable: "the VMM died"
  QmpClient::Options o;
  o.abort_fd = ev.get();
  o.peer = "VM x";
  auto c = QmpClient::Open(std::move(a), o);
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_NE(c.status().message().find("VM x: VMM exited before QMP was ready"), std::string::npos);
}

TEST(QmpClientTest, HandshakeRejectsNonGreetingAndCapabilityErrors) {
  {
    auto [a, b] = SocketPair();
    FakeQmp server(std::move(b));
    server.SendLine(R"({"event": "STOP"})");
    auto c = QmpClient::Open(std::move(a), {});
    EXPECT_NE(c.status().message().find("not a greeting"), std::string::npos) << c.status().ToString();
  }
  {
    auto [a, b] = SocketPair();
    auto server = std::make_unique<FakeQmp>(std::move(b));
    auto fut = std::async(std::launch::async, [fd = std::move(a)]() mutable { return QmpClient::Open(std::move(fd), {}); });
    server->SendLine(kGreeting);
    json caps = server->ReadCommand();
    server->SendLine(json{{"error", {{"class", "CommandNotFound"}, {"desc", "no"}}}, {"id", caps["id"]}}.dump());
    auto c = fut.get();
    EXPECT_EQ(c.status().code(), Code::kUnimplemented);
  }
  {
    auto [a, b] = SocketPair();
    FakeQmp server(std::move(b));
    server.Send(R"({"QMP": {"version")");
    server.Close();
    auto c = QmpClient::Open(std::move(a), {});
    EXPECT_EQ(c.status().code(), Code::kUnavailable);
  }
}

TEST(QmpClientTest, LinesReadDuringTheHandshakeAreProcessedAtOnce) {
  auto [a, b] = SocketPair();
  auto server = std::make_unique<FakeQmp>(std::move(b));
  auto fut = std::async(std::launch::async, [fd = std::move(a)]() mutable { return QmpClient::Open(std::move(fd), {}); });
  server->SendLine(kGreeting);
  json caps = server->ReadCommand();
  // One write: the reply and a line after it, read together by the
  // handshake. The reader must act on that line without waiting for more.
  server->Send(json{{"return", json::object()}, {"id", caps["id"]}}.dump() + "\r\nnot json\r\n");
  auto client = fut.get();
  ASSERT_OK(client);
  EXPECT_TRUE((*client)->WaitClosed(milliseconds(5000)));
  EXPECT_NE((*client)->close_reason().find("not JSON"), std::string::npos) << (*client)->close_reason();
}

TEST(QmpClientTest, CloseWakesWaitersAndIsIdempotent) {
  auto p = Connected();
  ASSERT_TRUE(p.client);
  auto waiter = p.client->Expect("RESUME");
  auto fut = std::async(std::launch::async, [&] { return waiter->Wait(milliseconds(10000)); });
  p.client->Close();
  EXPECT_EQ(fut.get().status().code(), Code::kUnavailable);
  p.client->Close();
  EXPECT_EQ(p.client->close_reason(), "closed by client");
}

}  // namespace
}  // namespace capsule::hypervisor
