// ProcessCgroup on a fake cgroup v2 root (a temp dir with cgroup.controllers):
// the path is created below it and each pid is written to its
// cgroup.procs; bad paths are refused naming the path. The real v1/v2
// hierarchies are covered by the CRI e2e suites (the VMM's /proc/PID/cgroup).
#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/host/process_cgroup.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {


TEST(ProcessCgroupTest, CreatesThePathAndMovesEachPidIntoIt) {
  auto root = TempDir::Create("cgroot");
  ASSERT_OK(root);
  ASSERT_OK(WriteFile(root->Join("cgroup.controllers"), "cpu memory pids\n"));
  auto cg = ProcessCgroup::Join("/kubepods/pod1/sandbox1", {::getpid()}, root->path());
  ASSERT_OK(cg);
  ASSERT_EQ((*cg)->dirs().size(), 1u);
  EXPECT_EQ((*cg)->dirs()[0], root->Join("kubepods/pod1/sandbox1"));
  auto procs = ReadFile(root->Join("kubepods/pod1/sandbox1/cgroup.procs"));
  ASSERT_OK(procs);
  EXPECT_EQ(*procs, std::to_string(::getpid()));
}

TEST(ProcessCgroupTest, RefusesPathsItCannotUseNamingThem) {
  for (const char* bad : {"kubepods.slice:cri-containerd:abc", "relative/path", "/a/../../etc", "/a/.."}) {
    auto cg = ProcessCgroup::Join(bad, {::getpid()}, "/nonexistent");
    ASSERT_FALSE(cg.ok()) << bad;
    EXPECT_EQ(cg.status().code(), Code::kInvalidArgument);
    EXPECT_NE(cg.status().message().find(bad), std::string::npos) << cg.status().message();
  }
}

// The kernel makes cpu.weight (v2) or cpu.shares (v1) with the group; here
// the test writes the default first, as the kernel would.
TEST(ProcessCgroupTest, ACpuWeightIsWrittenInEachHierarchysUnits) {
  auto root = TempDir::Create("cgroot");
  ASSERT_OK(root);
  ASSERT_OK(WriteFile(root->Join("cgroup.controllers"), "cpu memory pids\n"));
  auto cg = ProcessCgroup::Join("/pool", {}, root->path());
  ASSERT_OK(cg);
  Status none = (*cg)->SetCpuWeight(10);
  EXPECT_EQ(none.code(), Code::kNotFound) << none.ToString();
  EXPECT_NE(none.message().find(root->Join("pool")), std::string::npos) << none.message();

  ASSERT_OK(WriteFile(root->Join("pool/cpu.weight"), "100\n"));
  ASSERT_TRUE((*cg)->SetCpuWeight(10).ok());
  EXPECT_EQ(*ReadFile(root->Join("pool/cpu.weight")), "10");

  ASSERT_EQ(::unlink(root->Join("pool/cpu.weight").c_str()), 0);
  ASSERT_OK(WriteFile(root->Join("pool/cpu.shares"), "1024\n"));
  ASSERT_TRUE((*cg)->SetCpuWeight(10).ok());
  EXPECT_EQ(*ReadFile(root->Join("pool/cpu.shares")), "102") << "1024 shares per 100";
  EXPECT_EQ((*cg)->SetCpuWeight(0).code(), Code::kInvalidArgument);
  ::unlink(root->Join("pool/cpu.shares").c_str());
  ::unlink(root->Join("pool/cgroup.procs").c_str());
}

}  // namespace
}  // namespace capsule::testing
