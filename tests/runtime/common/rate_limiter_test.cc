#include "runtime/common/rate_limiter.h"

#include <gtest/gtest.h>

namespace capsule {
namespace {

using std::chrono::milliseconds;

TEST(RateLimiterTest, AllowsABurstPerWindowAndCountsTheRest) {
  RateLimiter limit(3, milliseconds(1000));
  const auto t0 = RateLimiter::Clock::now();
  EXPECT_TRUE(limit.Allow(t0));
  EXPECT_TRUE(limit.Allow(t0 + milliseconds(1)));
  EXPECT_TRUE(limit.Allow(t0 + milliseconds(2)));
  EXPECT_FALSE(limit.Allow(t0 + milliseconds(3)));
  EXPECT_FALSE(limit.Allow(t0 + milliseconds(999)));
  EXPECT_EQ(limit.refused(), 2u);
  // A new window starts a new burst; the refusals stay counted.
  EXPECT_TRUE(limit.Allow(t0 + milliseconds(1000)));
  EXPECT_TRUE(limit.Allow(t0 + milliseconds(1001)));
  EXPECT_TRUE(limit.Allow(t0 + milliseconds(1002)));
  EXPECT_FALSE(limit.Allow(t0 + milliseconds(1003)));
  EXPECT_EQ(limit.refused(), 3u);
}

TEST(RateLimiterTest, ABurstOfZeroRefusesEverything) {
  RateLimiter never(0, milliseconds(10));
  EXPECT_FALSE(never.Allow());
  EXPECT_EQ(never.refused(), 1u);
}

}  // namespace
}  // namespace capsule
