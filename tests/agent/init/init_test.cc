// The parts of PID 1's boot that can run on a host: the mount table and the
// cgroup controller selection against a fake cgroup directory. The real
// boot runs in agent_boot_test (QEMU).
#include <gtest/gtest.h>
#include <sys/mount.h>

#include "agent/init/cgroups.h"
#include "agent/init/mounts.h"
#include "agent/init/root.h"
#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::init {
namespace {

TEST(EarlyMounts, TableHasApiFilesystemsParentsFirst) {
  auto mounts = EarlyMounts(true);
  std::vector<std::string> targets;
  for (const auto& m : mounts) targets.emplace_back(m.target);
  EXPECT_EQ(targets, (std::vector<std::string>{"/proc", "/sys", "/dev", "/dev/pts", "/dev/shm", "/run", "/tmp",
                                               "/sys/fs/cgroup"}));
  EXPECT_EQ(std::string(mounts.back().fstype), "cgroup2");
  for (const auto& m : mounts) EXPECT_NE(m.flags & MS_NOSUID, 0u) << m.target;
  EXPECT_EQ(EarlyMounts(false).size(), mounts.size() - 1);
  // Joining a cgroup must not wait for an RCU grace period (every launch
  // does it); a kernel without the option still gets nsdelegate.
  EXPECT_STREQ(mounts.back().data, "nsdelegate,favordynmods");
  EXPECT_STREQ(mounts.back().older_kernel_data, "nsdelegate");
}

TEST(Cgroups, EnablesOfferedControllersAndReportsTheRest) {
  auto dir = TempDir::Create("cg");
  ASSERT_OK(dir);
  ASSERT_OK(WriteFile(dir->Join("cgroup.controllers"), "cpuset cpu io memory pids\n"));
  ASSERT_OK(WriteFile(dir->Join("cgroup.subtree_control"), ""));
  auto report = EnableControllers(dir->path(), {"cpu", "memory", "hugetlb", "pids"});
  ASSERT_OK(report);
  EXPECT_EQ(report->enabled, (std::vector<std::string>{"cpu", "memory", "pids"}));
  EXPECT_EQ(report->unavailable, (std::vector<std::string>{"hugetlb"}));
  // A plain file keeps the last write; the kernel file would accumulate.
  EXPECT_EQ(*ReadFile(dir->Join("cgroup.subtree_control")), "+pids");
}

TEST(Cgroups, MissingCgroupFsIsAnErrorNamingTheFile) {
  auto report = EnableControllers("/nonexistent-cgroup", {"cpu"});
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("/nonexistent-cgroup/cgroup.controllers"), std::string::npos);
}

TEST(Root, HostRootIsNotTheInitramfs) {
  // On the build host "/" is a disk (or overlay) mount with a parent, so
  // MakeRootPivotable must leave it alone.
  EXPECT_FALSE(RootIsInitramfs());
  EXPECT_OK(MakeRootPivotable());
}

}  // namespace
}  // namespace capsule::agent::init
