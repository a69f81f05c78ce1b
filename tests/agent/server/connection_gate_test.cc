// The agent's connection gate with a real socket pair: what is admitted to
// gRPC, and what is closed before it sees a byte.
#include "agent/server/connection_gate.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime/common/agent_auth.h"

namespace capsule::agent::server {
namespace {

using std::chrono::milliseconds;

struct Pair {
  UniqueFd ours, theirs;
};
Pair SocketPair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

// True when the peer closed `fd` (read gives end of file) within 5 s.
bool ClosedByPeer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return false;
  char c;
  return ::read(fd, &c, 1) == 0;
}

TEST(ConnectionGateTest, AVmGivenNoTokenAdmitsNoOneWhenATokenIsRequired) {
  std::atomic<int> admitted{0};
  ConnectionGate gate(RequireToken([]() -> Result<std::optional<std::string>> { return std::optional<std::string>(); }),
                      [&](UniqueFd) { ++admitted; });
  Pair p = SocketPair();
  gate.Offer(std::move(p.theirs));
  EXPECT_TRUE(ClosedByPeer(p.ours.get())) << "the connection was not closed";
  gate.Close();
  EXPECT_EQ(admitted.load(), 0);
}

TEST(ConnectionGateTest, ARequiredTokenThatIsPresentMustBeProved) {
  auto token = agent_auth::NewToken();
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  std::atomic<int> admitted{0};
  ConnectionGate gate(RequireToken([t = *token]() -> Result<std::optional<std::string>> { return std::optional<std::string>(t); }),
                      [&](UniqueFd) { ++admitted; }, GateOptions{8, milliseconds(2000)});
  Pair wrong = SocketPair();
  gate.Offer(std::move(wrong.theirs));
  auto other = agent_auth::NewToken();
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(agent_auth::Prove(wrong.ours.get(), *other, milliseconds(5000)).code(), Code::kPermissionDenied);
  Pair right = SocketPair();
  gate.Offer(std::move(right.theirs));
  EXPECT_TRUE(agent_auth::Prove(right.ours.get(), *token, milliseconds(5000)).ok());
  // The gate answers the proof, then admits: wait for the admission
  // (Close drops one still on its way).
  for (int i = 0; i < 500 && admitted.load() == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  gate.Close();
  EXPECT_EQ(admitted.load(), 1);
}

// Without RequireToken (a --no-init agent given no token file) nothing is
// asked: the caller chose that.
TEST(ConnectionGateTest, NoTokenSourceAdmitsWithoutAHandshake) {
  std::atomic<int> admitted{0};
  ConnectionGate gate(nullptr, [&](UniqueFd) { ++admitted; });
  Pair p = SocketPair();
  gate.Offer(std::move(p.theirs));
  gate.Close();
  EXPECT_EQ(admitted.load(), 1);
}

}  // namespace
}  // namespace capsule::agent::server
