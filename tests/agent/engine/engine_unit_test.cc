// Unit tests of the engine's logic: cgroup file formats and conversions,
// the lifecycle table, cgroup path resolution, mount points made inside a
// root (in a temp dir), seccomp compilation errors, capability masks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/engine/capabilities.h"
#include "agent/engine/cgroup2.h"
#include "agent/engine/cgroup_stats.h"
#include "agent/engine/container_state.h"
#include "agent/engine/seccomp.h"
#include "agent/engine/secure_path.h"
#include "runtime/common/file_util.h"
#include "runtime/oci/spec_parser.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine {
namespace {

TEST(CgroupStatsTest, FlatKeyedAndSingleValues) {
  auto kv = ParseFlatKeyed("usage_usec 1200\nuser_usec 700\nbroken\nsystem_usec x\n");
  ASSERT_EQ(kv.size(), 2u);
  EXPECT_EQ(FlatValue(kv, "usage_usec"), 1200u);
  EXPECT_EQ(FlatValue(kv, "system_usec"), 0u);
  EXPECT_EQ(ParseSingleValue("4096\n"), 4096u);
  EXPECT_EQ(ParseSingleValue("max\n"), UINT64_MAX);
  EXPECT_FALSE(ParseSingleValue("12ab").has_value());
  EXPECT_EQ(EventValue("populated 1\nfrozen 0\n", "frozen"), 0u);
  EXPECT_FALSE(EventValue("populated 1\n", "frozen").has_value());
}

TEST(CgroupStatsTest, IoStat) {
  auto io = ParseIoStat("8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n253:1 rbytes=5\nbad line\n");
  ASSERT_EQ(io.size(), 2u);
  EXPECT_EQ(io[0].major, 8u);
  EXPECT_EQ(io[0].wbytes, 8192u);
  EXPECT_EQ(io[0].wios, 2u);
  EXPECT_EQ(io[1].minor, 1u);
  EXPECT_EQ(io[1].rbytes, 5u);
}

TEST(CgroupStatsTest, Conversions) {
  EXPECT_EQ(SharesToWeight(2), 1u);
  EXPECT_EQ(SharesToWeight(1024), 39u);  // runc's mapping of the default share
  EXPECT_EQ(SharesToWeight(262144), 10000u);
  EXPECT_EQ(BlkioWeightToIoWeight(10), 1u);
  EXPECT_EQ(BlkioWeightToIoWeight(1000), 10000u);
  EXPECT_EQ(LimitString(-1), "max");
  EXPECT_EQ(LimitString(1048576), "1048576");
}

TEST(ContainerStateTest, TransitionsNameBothStates) {
  using S = ContainerState;
  EXPECT_OK(CheckTransition("c", S::kCreated, S::kRunning));
  EXPECT_OK(CheckTransition("c", S::kRunning, S::kPaused));
  EXPECT_OK(CheckTransition("c", S::kPaused, S::kRunning));
  EXPECT_OK(CheckTransition("c", S::kCreated, S::kStopped));
  Status st = CheckTransition("c1", S::kStopped, S::kRunning);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_EQ(st.message(), "container c1: cannot go from stopped to running");
  EXPECT_FALSE(CheckTransition("c", S::kCreated, S::kPaused).ok());
  EXPECT_FALSE(CheckTransition("c", S::kStopped, S::kStopped).ok());
}

TEST(CgroupPathTest, Resolution) {
  EXPECT_EQ(*ResolveCgroupPath("", "capsule", "c1"), "capsule/c1");
  EXPECT_EQ(*ResolveCgroupPath("/kubepods/pod1/c1", "capsule", "c1"), "kubepods/pod1/c1");
  EXPECT_EQ(*ResolveCgroupPath("kubepods.slice:cri-containerd:abc", "capsule", "abc"),
            "kubepods.slice/cri-containerd-abc.scope");
  auto bad = ResolveCgroupPath("/a/../../etc", "capsule", "c1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("linux.cgroupsPath"), std::string::npos);
  EXPECT_FALSE(ResolveCgroupPath("/", "capsule", "c1").ok());
}

TEST(SecurePathTest, SplitParent) {
  EXPECT_EQ(SplitParent("/dev/pts/ptmx"), std::make_pair(std::string("dev/pts"), std::string("ptmx")));
  EXPECT_EQ(SplitParent("//null"), std::make_pair(std::string(""), std::string("null")));
}

// A file mount point is created empty (parents too), what is there stays
// as it was, and a symlink is followed inside the root, never out of it.
TEST(SecurePathTest, EnsureMountPointMakesAFileOnceAndStaysInTheRoot) {
  auto dir = TempDir::Create("capsule-mountpoint");
  ASSERT_OK(dir);
  const std::string root = dir->Join("root");
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root_fd);

  auto made = EnsureMountPoint(root_fd.get(), "/etc/hostname", false);
  ASSERT_OK(made);
  struct stat st{};
  ASSERT_EQ(::stat((root + "/etc/hostname").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_size, 0);
  struct stat by_fd{};
  ASSERT_EQ(::fstat(made->get(), &by_fd), 0);
  EXPECT_EQ(by_fd.st_ino, st.st_ino);

  ASSERT_OK(WriteFile(root + "/etc/hosts", "127.0.0.1 kept\n"));
  ASSERT_OK(EnsureMountPoint(root_fd.get(), "/etc/hosts", false));
  EXPECT_EQ(ReadFile(root + "/etc/hosts").value_or(""), "127.0.0.1 kept\n");

  // An absolute symlink names a path of the root, not of the host.
  const std::string outside = dir->Join("outside");
  ASSERT_EQ(::symlink(outside.c_str(), (root + "/etc/resolv.conf").c_str()), 0);
  auto linked = EnsureMountPoint(root_fd.get(), "/etc/resolv.conf", false);
  EXPECT_FALSE(linked.ok());
  EXPECT_FALSE(PathExists(outside));

  EXPECT_OK(EnsureMountPoint(root_fd.get(), "/", false));
}

oci::Seccomp ProfileWith(const std::string& syscalls_json) {
  auto spec = oci::ParseSpec(R"({"root": {"path": "/r"}, "process": {"args": ["a"], "cwd": "/"},
    "linux": {"seccomp": {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
    "syscalls": )" + syscalls_json + "}}}");
  EXPECT_OK(spec);
  return *spec->linux.seccomp;
}

TEST(SeccompTest, CompilesProfileWithArguments) {
  auto p = CompileSeccomp(ProfileWith(R"([
    {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
    {"names": ["chmod"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 1, "value": 511, "op": "SCMP_CMP_EQ"}]},
    {"names": ["personality"], "action": "SCMP_ACT_ERRNO",
     "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}, {"index": 0, "value": 2, "op": "SCMP_CMP_EQ"}]},
    {"names": ["read"], "action": "SCMP_ACT_ALLOW"}])"));
  ASSERT_OK(p);
  EXPECT_GT(p->filter.size(), 8u);
}

TEST(SeccompTest, UnknownSyscallNamesTheField) {
  auto p = CompileSeccomp(ProfileWith(R"([{"names": ["read", "no_such_call"], "action": "SCMP_ACT_ERRNO"}])"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "linux.seccomp.syscalls[0].names[1]: unknown syscall \"no_such_call\"");
}

TEST(SeccompTest, UnknownArchitectureAndNotifyRejected) {
  oci::Seccomp s = ProfileWith("[]");
  s.architectures = {"SCMP_ARCH_X86_64", "SCMP_ARCH_PDP11"};
  auto p = CompileSeccomp(s);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("linux.seccomp.architectures[1]: unknown architecture"), std::string::npos);
  oci::Seccomp n = ProfileWith(R"([{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}])");
  auto q = CompileSeccomp(n);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Code::kUnimplemented);
}

TEST(CapabilitiesTest, MasksDropCapsUnknownToTheKernel) {
  oci::Capabilities c;
  c.bounding = {0, 5, 40};
  c.ambient = {5};
  CapabilityPlan p = PlanCapabilities(c, /*last_cap=*/38);
  EXPECT_TRUE(p.apply);
  EXPECT_EQ(p.bounding, (uint64_t{1} << 0) | (uint64_t{1} << 5));
  EXPECT_EQ(p.ambient, uint64_t{1} << 5);
  EXPECT_FALSE(PlanCapabilities(std::nullopt, 40).apply);
}

}  // namespace
}  // namespace capsule::engine
