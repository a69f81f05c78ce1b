// The agent's connection gate with a real socket pair: what is admitted to
// gRPC, and what is closed before it sees a byte.
#include "agent/server/connection_gate.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/wire/agent_auth.h"
#include "tests/support/status_matchers.h"

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
  ASSERT_OK(token);
  std::atomic<int> admitted{0};
  ConnectionGate gate(RequireToken([t = *token]() -> Result<std::optional<std::string>> { return std::optional<std::string>(t); }),
                      [&](UniqueFd) { ++admitted; }, GateOptions{8, milliseconds(2000)});
  Pair wrong = SocketPair();
  gate.Offer(std::move(wrong.theirs));
  auto other = agent_auth::NewToken();
  ASSERT_OK(other);
  EXPECT_EQ(agent_auth::Prove(wrong.ours.get(), *other, milliseconds(5000)).code(), Code::kPermissionDenied);
  Pair right = SocketPair();
  gate.Offer(std::move(right.theirs));
  EXPECT_OK(agent_auth::Prove(right.ours.get(), *token, milliseconds(5000)));
  // The gate answers the proof, then admits: wait for the admission
  // (Close drops one still on its way).
  for (int i = 0; i < 500 && admitted.load() == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  gate.Close();
  EXPECT_EQ(admitted.load(), 1);
}

// Silent dialers (any local user can reach a guest's CID over the kernel's
// vhost-vsock) do not keep the host out: past the bound, the connection
// that waited longest gives way, and the host proves its token at once.
TEST(ConnectionGateTest, SilentDialersDoNotKeepAProvingConnectionOut) {
  auto token = agent_auth::NewToken();
  ASSERT_OK(token);
  std::atomic<int> admitted{0};
  std::atomic<int> reads{0};
  ConnectionGate gate(RequireToken([&, t = *token]() -> Result<std::optional<std::string>> {
                        ++reads;
                        return std::optional<std::string>(t);
                      }),
                      [&](UniqueFd) { ++admitted; }, GateOptions{8, milliseconds(2000)});
  std::vector<Pair> silent;
  for (int i = 0; i < 64; ++i) {
    silent.push_back(SocketPair());
    gate.Offer(std::move(silent.back().theirs));
  }
  EXPECT_EQ(reads.load(), 0) << "silent dialers made the gate read the token";
  Pair host = SocketPair();
  const auto start = std::chrono::steady_clock::now();
  gate.Offer(std::move(host.theirs));
  EXPECT_OK(agent_auth::Prove(host.ours.get(), *token, milliseconds(5000)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000)) << "the host waited for the silent ones";
  for (int i = 0; i < 500 && admitted.load() == 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(admitted.load(), 1);
  // The oldest silent ones were closed to make room.
  EXPECT_TRUE(ClosedByPeer(silent.front().ours.get()));
  gate.Close();
}

// The token is read once for many connections, and again when a peer
// names another (a template clone's new token after its restore); the old
// one is refused from then on, and wrong tokens cannot make it read often.
TEST(ConnectionGateTest, TheTokenIsReadOnceAndAgainOnlyWhenAPeerNamesAnother) {
  auto first = agent_auth::NewToken();
  auto second = agent_auth::NewToken();
  ASSERT_TRUE(first.ok() && second.ok());
  std::mutex mu;
  std::string current = *first;
  std::atomic<int> reads{0};
  std::atomic<int> admitted{0};
  ConnectionGate gate(RequireToken([&]() -> Result<std::optional<std::string>> {
                        ++reads;
                        std::lock_guard lock(mu);
                        return std::optional<std::string>(current);
                      }),
                      [&](UniqueFd) { ++admitted; }, GateOptions{8, milliseconds(2000)});
  auto prove = [&](const std::string& t) {
    Pair p = SocketPair();
    gate.Offer(std::move(p.theirs));
    return agent_auth::Prove(p.ours.get(), t, milliseconds(5000)).code();
  };
  for (int i = 0; i < 10; ++i) EXPECT_EQ(prove(*first), Code::kOk);
  EXPECT_EQ(reads.load(), 1);
  {
    std::lock_guard lock(mu);
    current = *second;  // restored as a clone
  }
  EXPECT_EQ(prove(*first), Code::kOk) << "the cached token still answers until a peer names another";
  EXPECT_EQ(prove(*second), Code::kOk);
  EXPECT_EQ(reads.load(), 2);
  EXPECT_EQ(prove(*first), Code::kPermissionDenied);
  for (int i = 0; i < 20; ++i) {
    auto wrong = agent_auth::NewToken();
    ASSERT_OK(wrong);
    EXPECT_EQ(prove(*wrong), Code::kPermissionDenied);
  }
  EXPECT_LE(reads.load(), 2 + 2 * static_cast<int>(kTokenRereads)) << "wrong tokens made it read the token each time";
  gate.Close();
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
