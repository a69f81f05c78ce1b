// CancelToken: the first reason wins, the fd becomes readable, callbacks
// run once (at once when registered late), an unregistered one never runs,
// and a Deadline cancels only if it is still alive when its time comes.
#include "shim/pod/cancel_token.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>

namespace capsule::shim::pod {
namespace {

using std::chrono::milliseconds;

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(CancelToken, FirstReasonWinsAndTheFdBecomesReadable) {
  auto t = CancelToken::Make();
  ASSERT_OK(t);
  CancelToken& token = **t;
  EXPECT_FALSE(token.cancelled());
  EXPECT_OK(token.reason());
  EXPECT_FALSE(Readable(token.fd()));
  int runs = 0;
  auto reg = token.OnCancel([&] { ++runs; });
  token.Cancel(DeadlineExceeded("first"));
  token.Cancel(Cancelled("second"));
  EXPECT_TRUE(token.cancelled());
  EXPECT_EQ(token.reason(), DeadlineExceeded("first"));
  EXPECT_TRUE(Readable(token.fd()));
  EXPECT_EQ(runs, 1);
  int late = 0;
  auto late_reg = token.OnCancel([&] { ++late; });
  EXPECT_EQ(late, 1) << "registered after the cancel: runs at once";
}

TEST(CancelToken, AnUnregisteredCallbackNeverRuns) {
  auto t = CancelToken::Make();
  ASSERT_OK(t);
  int runs = 0;
  { auto reg = (*t)->OnCancel([&] { ++runs; }); }
  (*t)->Cancel(Cancelled("gone"));
  EXPECT_EQ(runs, 0);
}

TEST(CancelToken, ADeadlineCancelsOnlyWhileItLives) {
  auto t = CancelToken::Make();
  ASSERT_OK(t);
  { CancelToken::Deadline d(*t, std::chrono::steady_clock::now() + milliseconds(5000), DeadlineExceeded("late")); }
  EXPECT_FALSE((*t)->cancelled()) << "the work ended first";
  std::atomic<bool> ran{false};
  auto reg = (*t)->OnCancel([&] { ran = true; });
  {
    CancelToken::Deadline d(*t, std::chrono::steady_clock::now() + milliseconds(50), DeadlineExceeded("past"));
    for (int i = 0; i < 200 && !ran; ++i) ::usleep(10 * 1000);
  }
  EXPECT_TRUE(ran.load());
  EXPECT_EQ((*t)->reason(), DeadlineExceeded("past"));
}

}  // namespace
}  // namespace capsule::shim::pod
