// Nice values per thread and per process tree: what the pool's refills and
// claims rely on.
#include "runtime/host/process_priority.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

int NiceOf(id_t tid) {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, tid);
  return errno == 0 ? nice : -100;
}

TEST(ProcessPriorityTest, AThreadsNiceValueIsItsOwnAndGoesToWhatItSpawns) {
  const int ours = NiceOf(static_cast<id_t>(::syscall(SYS_gettid)));
  int in_thread = -100;
  int child = -100;
  std::thread t([&] {
    ASSERT_OK(SetThreadNice(ours + 3));
    in_thread = NiceOf(static_cast<id_t>(::syscall(SYS_gettid)));
    SpawnOptions o;
    o.argv = {"/bin/sleep", "30"};
    auto c = ChildProcess::Spawn(o);
    ASSERT_OK(c);
    child = NiceOf(static_cast<id_t>(c->pid()));
    (void)c->Signal(SIGKILL);
    (void)c->Wait();
  });
  t.join();
  EXPECT_EQ(in_thread, ours + 3);
  EXPECT_EQ(child, ours + 3) << "a spawned process starts with its thread's value";
  EXPECT_EQ(NiceOf(static_cast<id_t>(::syscall(SYS_gettid))), ours) << "the other threads keep theirs";
}

TEST(ProcessPriorityTest, EveryThreadOfEveryProcessIsSetAndAGoneOneIsSkipped) {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "30"};
  auto c = ChildProcess::Spawn(o);
  ASSERT_OK(c);
  const int target = NiceOf(static_cast<id_t>(c->pid())) + 2;
  ASSERT_OK(SetProcessesNice({c->pid()}, target));
  for (const std::string& tid : ListDir("/proc/" + std::to_string(c->pid()) + "/task"))
    EXPECT_EQ(NiceOf(static_cast<id_t>(std::stoul(tid))), target) << "thread " << tid;
  (void)c->Signal(SIGKILL);
  (void)c->Wait();
  EXPECT_OK(SetProcessesNice({c->pid()}, target)) << "a process that is gone has no threads to set";
}

}  // namespace
}  // namespace capsule
