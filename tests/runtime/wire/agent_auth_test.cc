// Both ends of the agent token handshake over a socketpair: the exact bytes,
// a wrong or malformed token, a silent or vanished peer, and that neither
// side reads past its line into what follows (gRPC's bytes).
#include "runtime/wire/agent_auth.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <set>

#include "runtime/common/reasons.h"
#include "runtime/common/unique_fd.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent_auth {
namespace {

using std::chrono::milliseconds;

struct Pair {
  UniqueFd host, agent;
};

Pair MakePair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::string ReadAvailable(int fd) {
  char buf[256];
  ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

TEST(AgentAuthTest, TokensAreFreshLowercaseHexOfTheAbiLength) {
  std::set<std::string> seen;
  for (int i = 0; i < 32; ++i) {
    auto t = NewToken();
    ASSERT_OK(t);
    EXPECT_TRUE(IsWellFormedToken(*t)) << *t;
    seen.insert(*t);
  }
  EXPECT_EQ(seen.size(), 32u);
  EXPECT_FALSE(IsWellFormedToken(""));
  EXPECT_FALSE(IsWellFormedToken(std::string(64, 'A')));
  EXPECT_FALSE(IsWellFormedToken(std::string(63, 'a')));
  EXPECT_FALSE(IsWellFormedToken(std::string(65, 'a')));
  EXPECT_TRUE(IsWellFormedToken(std::string(64, 'f')));
}

TEST(AgentAuthTest, TheRightTokenIsAnsweredOkAndWhatFollowsStaysInTheSocket) {
  Pair p = MakePair();
  const std::string token = *NewToken();
  auto agent = std::async(std::launch::async, [&] {
    Status st = Check(p.agent.get(), token, milliseconds(5000));
    // What the agent sends next is gRPC's: the host must not have eaten it.
    (void)::send(p.agent.get(), "after", 5, MSG_NOSIGNAL);
    return st;
  });
  Status proved = Prove(p.host.get(), token, milliseconds(5000));
  EXPECT_OK(proved);
  EXPECT_OK(agent.get());
  std::string rest;
  for (int i = 0; i < 100 && rest.size() < 5; ++i) {
    rest += ReadAvailable(p.host.get());
    if (rest.size() < 5) ::usleep(10000);
  }
  EXPECT_EQ(rest, "after");
}

TEST(AgentAuthTest, AnotherTokenIsDeniedOnBothSidesByName) {
  Pair p = MakePair();
  auto agent = std::async(std::launch::async, [&] { return Check(p.agent.get(), *NewToken(), milliseconds(5000)); });
  Status proved = Prove(p.host.get(), *NewToken(), milliseconds(5000));
  EXPECT_EQ(proved.code(), Code::kPermissionDenied) << proved.ToString();
  EXPECT_REASON(proved, reason::kAgentTokenRefused);
  Status checked = agent.get();
  EXPECT_EQ(checked.code(), Code::kPermissionDenied);
  EXPECT_REASON(checked, reason::kAgentTokenRefused);
}

TEST(AgentAuthTest, AnythingButAnAuthLineIsDenied) {
  const std::string token = *NewToken();
  for (const std::string& line : {std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), "AUTH " + token + "x\n",
                                  "AUTH " + token.substr(1) + "\n", "auth " + token + "\n",
                                  std::string(200, 'A')}) {
    Pair p = MakePair();
    ASSERT_EQ(::send(p.host.get(), line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
    Status st = Check(p.agent.get(), token, milliseconds(2000));
    EXPECT_EQ(st.code(), Code::kPermissionDenied) << line << ": " << st.ToString();
    EXPECT_EQ(ReadAvailable(p.host.get()), "DENIED\n") << line;
  }
}

TEST(AgentAuthTest, AnAgentWithoutAWellFormedTokenDeniesEvenTheEmptyProof) {
  Pair p = MakePair();
  const std::string line = "AUTH " + std::string(64, 'a') + "\n";
  ASSERT_EQ(::send(p.host.get(), line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
  EXPECT_EQ(Check(p.agent.get(), "garbage", milliseconds(2000)).code(), Code::kPermissionDenied);
}

TEST(AgentAuthTest, ASilentPeerRunsOutOfTimeAndAGoneOneIsUnavailable) {
  {
    Pair p = MakePair();
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(Check(p.agent.get(), *NewToken(), milliseconds(200)).code(), Code::kDeadlineExceeded);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(3000));
    EXPECT_EQ(Prove(p.host.get(), *NewToken(), milliseconds(200)).code(), Code::kDeadlineExceeded);
  }
  {
    Pair p = MakePair();
    p.agent.reset();
    EXPECT_EQ(Prove(p.host.get(), *NewToken(), milliseconds(1000)).code(), Code::kUnavailable);
  }
  {
    Pair p = MakePair();
    p.host.reset();
    EXPECT_EQ(Check(p.agent.get(), *NewToken(), milliseconds(1000)).code(), Code::kUnavailable);
  }
  Pair p = MakePair();
  EXPECT_EQ(Prove(p.host.get(), "not-a-token", milliseconds(1000)).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace capsule::agent_auth
