// Backoff: the pause doubles from first to max, starts over after Reset,
// and a wait never runs past its deadline; WaitUntil polls with it.
#include "runtime/common/backoff.h"

#include <gtest/gtest.h>

namespace capsule {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesUpToTheCapAndStartsOverAfterProgress) {
  Backoff b({milliseconds(1), milliseconds(50)});
  EXPECT_EQ(b.current(), milliseconds(0));
  std::vector<int64_t> got;
  for (int i = 0; i < 8; ++i) got.push_back(b.Next().count());
  EXPECT_EQ(got, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 50, 50}));
  b.Reset();
  EXPECT_EQ(b.Next(), milliseconds(1));
  // A fixed poll.
  Backoff poll({milliseconds(5), milliseconds(5)});
  EXPECT_EQ(poll.Next(), milliseconds(5));
  EXPECT_EQ(poll.Next(), milliseconds(5));
}

TEST(BackoffTest, APolicyGivesThePauseAfterAnother) {
  constexpr BackoffPolicy p{milliseconds(1000), milliseconds(60000)};
  EXPECT_EQ(p.After(milliseconds(0)), milliseconds(1000));
  EXPECT_EQ(p.After(milliseconds(1000)), milliseconds(2000));
  EXPECT_EQ(p.After(milliseconds(40000)), milliseconds(60000));
  EXPECT_EQ(kEmptyReadBackoff.After(milliseconds(64)), milliseconds(128));
  EXPECT_EQ(kEmptyReadBackoff.After(milliseconds(128)), milliseconds(128));
}

TEST(BackoffTest, AWaitEndsAtItsDeadline) {
  Backoff b({milliseconds(60000), milliseconds(60000)});
  const auto t0 = std::chrono::steady_clock::now();
  b.Wait(t0 + milliseconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(30000)) << "slept the whole minute";
  b.Wait(t0);  // already past: no sleep at all
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(30000));
}

TEST(BackoffTest, WaitUntilSeesAConditionThatComesAndGivesUpOnOneThatDoesNot) {
  int checks = 0;
  EXPECT_TRUE(WaitUntil([&] { return ++checks == 3; }, milliseconds(60000), {milliseconds(1), milliseconds(1)}));
  EXPECT_EQ(checks, 3) << "checked again after it held";
  checks = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(WaitUntil([&] { return ++checks < 0; }, milliseconds(50)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(50));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(30000)) << "ran past its timeout";
  EXPECT_GE(checks, 2) << "a check at the start and one at the deadline";
}

}  // namespace
}  // namespace capsule
