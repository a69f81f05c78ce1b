// VMM uids: a uid whose lock is free is still not handed out while a
// process runs as it (a compromised QEMU can close the lock fd it holds).
// Root only (setuid); CI runs as root.
#include "runtime/hypervisor/vmm_user.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/host/process_uids.h"
#include "tests/support/status_matchers.h"

namespace capsule::hypervisor {
namespace {

using std::chrono::milliseconds;

TEST(ProcessUidsTest, FindsThisProcessByItsUid) {
  auto pids = ProcessesRunningAs(::geteuid());
  ASSERT_OK(pids);
  EXPECT_NE(std::find(pids->begin(), pids->end(), ::getpid()), pids->end());
}

TEST(VmmUserTest, AUidAProcessStillRunsAsIsNotHandedOutThoughItsLockIsFree) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setuid)";
  auto dir = TempDir::Create("capsule-vmm-uid");
  ASSERT_OK(dir);
  config::Config cfg;
  cfg.runtime.state_dir = dir->path();
  cfg.hypervisor.vmm_uid_base = 2147000000u + static_cast<uint32_t>(::getpid() % 100000) * 4;
  cfg.hypervisor.vmm_uid_count = 1;
  const uid_t uid = cfg.hypervisor.vmm_uid_base;

  // A VMM that let its lock go: it runs as the uid and holds nothing.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {
    auto pids = ProcessesRunningAs(uid);
    running = pids.ok() && !pids->empty();
    if (!running) std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(running) << "the child never ran as " << uid;
  auto taken = AcquireVmmUser(cfg, "vm-a");
  EXPECT_EQ(taken.status().code(), Code::kResourceExhausted) << "uid handed out while pid " << child << " runs as it";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);

  auto free = AcquireVmmUser(cfg, "vm-b");
  ASSERT_OK(free);
  EXPECT_EQ(free->uid, uid);
  // And while its lock is held, it is not handed out either.
  EXPECT_EQ(AcquireVmmUser(cfg, "vm-c").status().code(), Code::kResourceExhausted);
}

}  // namespace
}  // namespace capsule::hypervisor
