#include "runtime/ttrpc/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>

#include "tests/runtime/ttrpc/test_util.h"

namespace capsule::ttrpc {
namespace {

using namespace std::chrono_literals;

// Each test declares its pool after the objects its jobs capture, so the
// pool (and every job) is gone before they are destroyed, even when an
// assertion returns early.

TEST(WorkerPoolTest, BlockedJobDoesNotDelayOthers) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::latch blocked_started(1);
  std::latch others(5);
  WorkerPool pool(8, 30s);
  ASSERT_TRUE(pool.TrySubmit([&] {
    blocked_started.count_down();
    released.wait();
  }));
  blocked_started.wait();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.TrySubmit([&] { others.count_down(); }));
  others.wait();  // would hang if the jobs queued behind the blocked one
  release.set_value();
  pool.Close();
}

TEST(WorkerPoolTest, RefusesBeyondCapAndAcceptsAgainWhenASlotFrees) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::latch started(2);
  std::promise<void> ran;
  WorkerPool pool(2, 30s);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool.TrySubmit([&] {
      started.count_down();
      released.wait();
    }));
  }
  started.wait();
  EXPECT_FALSE(pool.TrySubmit([] {}));
  release.set_value();
  // Slots free as the blocked jobs return; a job gets in then.
  while (!pool.TrySubmit([&] { ran.set_value(); })) std::this_thread::yield();
  ran.get_future().wait();
  EXPECT_LE(pool.threads(), 2u);
  pool.Close();
}

TEST(WorkerPoolTest, CloseWaitsForRunningJobAndRefusesNewOnes) {
  std::atomic<bool> finished{false};
  std::latch started(1);
  std::promise<void> release;
  WorkerPool pool(4, 30s);
  ASSERT_TRUE(pool.TrySubmit([&, f = release.get_future().share()] {
    started.count_down();
    f.wait();
    finished = true;
  }));
  started.wait();
  auto closer = std::async(std::launch::async, [&] { pool.Close(); });
  release.set_value();
  closer.get();
  EXPECT_TRUE(finished);
  EXPECT_FALSE(pool.TrySubmit([] {}));
  EXPECT_EQ(pool.threads(), 0u);
}

TEST(WorkerPoolTest, DrainRefusesNewJobsAndLetsStartedOnesFinish) {
  std::latch started(1);
  std::promise<void> release;
  std::atomic<bool> finished{false};
  WorkerPool pool(4, 30s);
  ASSERT_TRUE(pool.TrySubmit([&, f = release.get_future().share()] {
    started.count_down();
    f.wait();
    finished = true;
  }));
  started.wait();
  auto drainer = std::async(std::launch::async, [&] { pool.Drain(); });
  // Drain() refuses as soon as it begins; wait for that, then release.
  while (pool.TrySubmit([] {})) std::this_thread::yield();
  release.set_value();
  drainer.get();
  EXPECT_TRUE(finished);
  EXPECT_EQ(pool.threads(), 0u);
}

TEST(WorkerPoolTest, ThreadsAreReusedForSequentialJobs) {
  WorkerPool pool(16, 30s);
  for (int i = 0; i < 50; ++i) {
    // Shared: the job may still be inside set_value() when wait() returns.
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> f = done->get_future();
    ASSERT_TRUE(pool.TrySubmit([done] { done->set_value(); }));
    f.wait();
    // Let the worker get back to waiting (no event marks that moment).
    while (pool.idle_threads() != pool.threads()) std::this_thread::yield();
  }
  EXPECT_EQ(pool.threads(), 1u);
}

TEST(WorkerPoolTest, IdleThreadsExitAndAreJoined) {
  const int before = testing::Threads();
  std::latch done(3);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> ran;
  WorkerPool pool(4, 20ms);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.TrySubmit([&] {
      done.count_down();
      released.wait();
    }));
  }
  done.wait();
  EXPECT_EQ(pool.threads(), 3u);
  release.set_value();
  // No event marks an idle exit; poll within a generous bound.
  auto limit = std::chrono::steady_clock::now() + 10s;
  while (pool.threads() > 0 && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(pool.threads(), 0u);
  // A new job spawns a thread and joins the exited ones.
  ASSERT_TRUE(pool.TrySubmit([&] { ran.set_value(); }));
  ran.get_future().wait();
  pool.Close();
  EXPECT_EQ(testing::Threads(), before);
}

}  // namespace
}  // namespace capsule::ttrpc
