#include "runtime/wire/port_forward_wire.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "runtime/common/byte_relay.h"
#include "runtime/common/unique_fd.h"
#include "tests/support/status_matchers.h"

namespace capsule::port_forward {
namespace {

using std::chrono::milliseconds;

TEST(PortForwardWireTest, ARequestRoundTripsForBothLoopbacks) {
  for (const Target& t : {Target{AF_INET, "127.0.0.1", 8080}, Target{AF_INET, "127.3.2.1", 1}, Target{AF_INET6, "::1", 65535}}) {
    std::string line = FormatRequest(t);
    ASSERT_EQ(line.back(), '\n');
    line.pop_back();
    auto parsed = ParseRequest(line);
    ASSERT_OK(parsed);
    EXPECT_EQ(parsed->family, t.family);
    EXPECT_EQ(parsed->address, t.address);
    EXPECT_EQ(parsed->port, t.port);
  }
}

TEST(PortForwardWireTest, TheAgentRefusesAnythingButTheGuestsLoopbackAndNamesWhy) {
  struct Case {
    const char* line;
    const char* says;
  };
  for (const Case& c : {Case{"FORWARD 10.0.0.1 80", "not a loopback"}, Case{"FORWARD ::2 80", "not ::1"},
                        Case{"FORWARD ::ffff:127.0.0.1 80", "not ::1"}, Case{"FORWARD localhost 80", "not an IP"},
                        Case{"FORWARD 127.0.0.1 0", "out of range"}, Case{"FORWARD 127.0.0.1 65536", "out of range"},
                        Case{"FORWARD 127.0.0.1 -1", "not a number"}, Case{"FORWARD 127.0.0.1 123456", "not a number"},
                        Case{"FORWARD 127.0.0.1", "no port"}, Case{"CONNECT 127.0.0.1 80", "not a FORWARD"},
                        Case{"FORWARD 127.0.0.1 80 ", "not a number"}}) {
    auto parsed = ParseRequest(c.line);
    ASSERT_FALSE(parsed.ok()) << c.line;
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument) << c.line;
    EXPECT_NE(parsed.status().message().find(c.says), std::string::npos) << c.line << ": " << parsed.status().message();
  }
  EXPECT_FALSE(ParseRequest("FORWARD 127.0.0.1 " + std::string(100, '1')).ok());
}

TEST(PortForwardWireTest, RepliesAreBoundedAndAGuestsTextIsMadePrintable) {
  EXPECT_EQ(FormatReply(Status::Ok()), "OK\n");
  EXPECT_OK(ParseReply("OK"));
  const std::string err = FormatReply(Unavailable("connect 127.0.0.1:9: Connection refused\n\x01" + std::string(500, 'x')));
  EXPECT_LE(err.size(), kMaxReplyLine);
  EXPECT_EQ(err.find('\x01'), std::string::npos);
  EXPECT_EQ(err.find('\n'), err.size() - 1);
  Status back = ParseReply(std::string_view(err).substr(0, err.size() - 1));
  EXPECT_EQ(back.code(), Code::kUnavailable);
  EXPECT_NE(back.message().find("Connection refused"), std::string::npos) << back.message();
  EXPECT_FALSE(ParseReply("OKAY").ok());
  EXPECT_FALSE(ParseReply(std::string("ERR \x1b[2J", 8)).message().find('\x1b') != std::string::npos);
}

// The host side of the exchange against a peer that answers in each way.
TEST(PortForwardWireTest, RequestReadsOneReplyLineAndNoMore) {
  struct Case {
    std::string reply;
    bool ok;
  };
  for (const Case& c : {Case{"OK\nafter", true}, Case{"ERR nope\n", false}, Case{std::string(4096, 'A'), false},
                        Case{"", false}}) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    UniqueFd host(sv[0]), agent(sv[1]);
    std::thread peer([&] {
      char buf[64];
      (void)!::read(agent.get(), buf, sizeof buf);
      (void)!::write(agent.get(), c.reply.data(), c.reply.size());
      if (c.reply.empty()) agent.reset();
    });
    Status st = Request(host.get(), Target{AF_INET, "127.0.0.1", 80}, milliseconds(2000));
    peer.join();
    EXPECT_EQ(st.ok(), c.ok) << c.reply.substr(0, 20) << ": " << st.ToString();
    if (c.ok) {
      char buf[16] = {};
      ASSERT_EQ(::recv(host.get(), buf, sizeof buf, MSG_DONTWAIT), 5);  // what follows the line stays
      EXPECT_EQ(std::string(buf, 5), "after");
    }
  }
}

TEST(PortForwardWireTest, ASilentAgentIsADeadline) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd host(sv[0]), agent(sv[1]);
  Status st = Request(host.get(), Target{AF_INET, "127.0.0.1", 80}, milliseconds(100));
  EXPECT_EQ(st.code(), Code::kDeadlineExceeded) << st.ToString();
}

// Relay: both directions, half-close passed on, and a stop.
TEST(ByteRelayTest, CopiesBothWaysAndPassesEachEndOfStreamOn) {
  int left[2], right[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, left), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, right), 0);
  UniqueFd client(left[0]), relay_a(left[1]), relay_b(right[0]), server(right[1]);
  RelayStats stats;
  Status relayed;
  std::thread relay([&] { relayed = Relay(relay_a.get(), relay_b.get(), -1, "test", &stats); });
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::thread writer([&] {
    size_t off = 0;
    while (off < big.size()) {
      ssize_t n = ::write(client.get(), big.data() + off, big.size() - off);
      ASSERT_GT(n, 0);
      off += static_cast<size_t>(n);
    }
    ::shutdown(client.get(), SHUT_WR);
  });
  std::string got;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(server.get(), buf, sizeof buf);
    ASSERT_GE(n, 0);
    if (n == 0) break;  // the client's half-close reached the server
    got.append(buf, static_cast<size_t>(n));
  }
  writer.join();
  EXPECT_EQ(got, big);
  // The other direction still works after the first one ended.
  ASSERT_EQ(::write(server.get(), "back", 4), 4);
  server.reset();
  std::string back;
  for (;;) {
    ssize_t n = ::read(client.get(), buf, sizeof buf);
    ASSERT_GE(n, 0);
    if (n == 0) break;
    back.append(buf, static_cast<size_t>(n));
  }
  relay.join();
  EXPECT_EQ(back, "back");
  EXPECT_OK(relayed);
  EXPECT_EQ(stats.a_to_b, big.size());
  EXPECT_EQ(stats.b_to_a, 4u);
}

TEST(ByteRelayTest, TheStopFdEndsARelayThatIsIdle) {
  int left[2], right[2], stop[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, left), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, right), 0);
  ASSERT_EQ(::pipe2(stop, O_CLOEXEC), 0);
  UniqueFd l0(left[0]), l1(left[1]), r0(right[0]), r1(right[1]), s0(stop[0]), s1(stop[1]);
  Status relayed;
  std::thread relay([&] { relayed = Relay(l1.get(), r0.get(), s0.get(), "idle"); });
  ASSERT_EQ(::write(s1.get(), "x", 1), 1);
  relay.join();
  EXPECT_EQ(relayed.code(), Code::kCancelled) << relayed.ToString();
}

TEST(ByteRelayTest, BytesForAPeerThatIsGoneFailTheRelayNamingThatSide) {
  int left[2], right[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, left), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, right), 0);
  UniqueFd client(left[0]), relay_a(left[1]), relay_b(right[0]), server(right[1]);
  Status relayed;
  server.reset();  // gone without a word
  std::thread relay([&] { relayed = Relay(relay_a.get(), relay_b.get(), -1, "vanish"); });
  ASSERT_EQ(::write(client.get(), "data", 4), 4);
  relay.join();
  EXPECT_EQ(relayed.code(), Code::kUnavailable) << relayed.ToString();
  EXPECT_NE(relayed.message().find("side b"), std::string::npos) << relayed.ToString();
}

}  // namespace
}  // namespace capsule::port_forward
