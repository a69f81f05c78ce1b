// The blocking-call gate admits up to its limit, refuses the next with
// RESOURCE_EXHAUSTED naming the limit, and frees a slot when it goes.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "agent/server/blocking_gate.h"
#include "agent/server/limits.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::server {
namespace {

TEST(BlockingGateTest, AdmitsUpToTheLimitThenRefuses) {
  BlockingGate gate(2);
  auto a = gate.Enter("WaitProcess");
  auto b = gate.Enter("ReadStdout");
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = gate.Enter("ReadStderr");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kResourceExhausted);
  EXPECT_NE(c.status().message().find("ReadStderr: 2 blocking calls"), std::string::npos) << c.status().message();
  EXPECT_EQ(gate.in_use(), 2u);
}

TEST(BlockingGateTest, ASlotGoingAwayAdmitsTheNextCall) {
  BlockingGate gate(1);
  {
    auto a = gate.Enter("WaitProcess");
    ASSERT_OK(a);
    EXPECT_FALSE(gate.Enter("WaitProcess").ok());
  }
  EXPECT_EQ(gate.in_use(), 0u);
  EXPECT_OK(gate.Enter("WaitProcess"));
}

TEST(BlockingGateTest, ConcurrentEntriesNeverExceedTheLimit) {
  BlockingGate gate(8);
  std::atomic<int> admitted{0}, peak{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        auto slot = gate.Enter("x");
        if (!slot.ok()) continue;
        int now = ++admitted;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        --admitted;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 8);
  EXPECT_EQ(gate.in_use(), 0u);
}

TEST(ServerLimitsTest, ThreadQuotaLeavesTheReserveBesideBlockingCalls) {
  ServerLimits limits;
  EXPECT_EQ(limits.MaxThreads(),
            static_cast<int>(kDefaultMaxBlockingCalls + kDefaultReservedThreads) + kMaxPollers);
  limits.max_blocking_calls = 4;
  limits.reserved_threads = 2;
  EXPECT_EQ(limits.MaxThreads(), 6 + kMaxPollers);
}

}  // namespace
}  // namespace capsule::agent::server
