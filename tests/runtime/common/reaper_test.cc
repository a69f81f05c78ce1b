// The reaper changes process-wide SIGCHLD handling, so it has its own binary.
#include "runtime/common/reaper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>

#include "runtime/common/subprocess.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

using namespace std::chrono_literals;

TEST(ReaperTest, ChildProcessWaitsThroughReaperAndSubscribersSeeEveryExit) {
  ASSERT_OK(Reaper::Instance().Start());
  ASSERT_TRUE(Reaper::Instance().active());
  std::mutex mu;
  std::set<pid_t> seen;
  // Unsubscribes on every exit path: a failed ASSERT must not leave the
  // reaper calling into this stack frame.
  struct Subscription {
    int token;
    ~Subscription() { Reaper::Instance().Unsubscribe(token); }
  } sub{Reaper::Instance().Subscribe([&](pid_t pid, int) {
    std::lock_guard lock(mu);
    seen.insert(pid);
  })};

  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "exit 7"};
  auto child = ChildProcess::Spawn(o);
  ASSERT_OK(child);
  auto st = child->Wait(10s);
  ASSERT_OK(st);
  EXPECT_EQ(ExitCode(*st), 7);

  // A child nobody owns (like an orphan reparented to PID 1) is reaped too.
  pid_t raw = ::fork();
  ASSERT_GE(raw, 0);
  if (raw == 0) ::_exit(0);
  auto raw_status = Reaper::Instance().WaitStatus(raw, std::chrono::steady_clock::now() + 10s);
  ASSERT_TRUE(raw_status.has_value());
  EXPECT_EQ(ExitCode(*raw_status), 0);

  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(seen.count(child->pid()));
    EXPECT_TRUE(seen.count(raw));
  }
}

TEST(ReaperTest, KilledChildReportsSignal) {
  ASSERT_OK(Reaper::Instance().Start());
  SpawnOptions o;
  o.argv = {"/bin/sleep", "100"};
  auto child = ChildProcess::Spawn(o);
  ASSERT_OK(child);
  ASSERT_OK(child->Signal(SIGKILL));
  auto st = child->Wait(10s);
  ASSERT_OK(st);
  EXPECT_EQ(ExitCode(*st), 128 + SIGKILL);
}

}  // namespace
}  // namespace capsule
