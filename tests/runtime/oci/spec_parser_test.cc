// OCI spec parsing: a containerd-shaped config.json round trip into the
// model, and malformed fields rejected with their JSON path.
#include "runtime/oci/spec_parser.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

namespace capsule::oci {
namespace {

// Shaped like what containerd 1.6's CRI plugin writes, trimmed.
constexpr const char* kFullSpec = R"json({
  "ociVersion": "1.0.2-dev",
  "process": {
    "terminal": true,
    "consoleSize": {"height": 40, "width": 120},
    "user": {"uid": 1000, "gid": 1001, "umask": 18, "additionalGids": [10, 20]},
    "args": ["/bin/sh", "-c", "echo hi"],
    "env": ["PATH=/usr/bin:/bin", "HOME=/root"],
    "cwd": "/work",
    "capabilities": {
      "bounding": ["CAP_CHOWN", "CAP_KILL"],
      "effective": ["CAP_CHOWN"],
      "permitted": ["CAP_CHOWN", "CAP_KILL"],
      "inheritable": [],
      "ambient": ["CAP_KILL"]
    },
    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 512}],
    "noNewPrivileges": true,
    "oomScoreAdj": 500,
    "apparmorProfile": "cri-containerd.apparmor.d",
    "someFutureField": {"x": 1}
  },
  "root": {"path": "rootfs", "readonly": true},
  "hostname": "pod-a",
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
    {"destination": "/etc/hosts", "type": "bind", "source": "/run/x/hosts", "options": ["rbind", "rprivate", "ro"]}
  ],
  "hooks": {"prestart": [{"path": "/usr/bin/hook", "args": ["hook", "x"], "timeout": 5}]},
  "annotations": {"io.kubernetes.cri.container-type": "sandbox"},
  "linux": {
    "namespaces": [{"type": "pid"}, {"type": "ipc", "path": "/proc/1/ns/ipc"}, {"type": "uts"},
                   {"type": "mount"}, {"type": "network", "path": "/var/run/netns/cni-1"}, {"type": "cgroup"}],
    "resources": {
      "devices": [{"allow": false, "access": "rwm"}],
      "memory": {"limit": 67108864, "swap": -1, "reservation": 1048576},
      "cpu": {"shares": 512, "quota": 50000, "period": 100000, "cpus": "0-1"},
      "pids": {"limit": 64},
      "blockIO": {"weight": 500, "throttleReadBpsDevice": [{"major": 8, "minor": 0, "rate": 1000}]},
      "unified": {"memory.high": "max"}
    },
    "cgroupsPath": "/kubepods/pod1/ctr1",
    "devices": [{"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229, "fileMode": 438}],
    "sysctl": {"net.ipv4.ip_forward": "1"},
    "maskedPaths": ["/proc/kcore", "/sys/firmware"],
    "readonlyPaths": ["/proc/sys"],
    "rootfsPropagation": "rslave",
    "seccomp": {
      "defaultAction": "SCMP_ACT_ERRNO",
      "defaultErrnoRet": 38,
      "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
      "syscalls": [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"},
                  {"index": 1, "value": 255, "valueTwo": 3, "op": "SCMP_CMP_MASKED_EQ"}]},
        {"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
      ]
    }
  }
})json";

TEST(OciSpecTest, ParsesContainerdShapedSpec) {
  auto spec = ParseSpec(kFullSpec);
  ASSERT_OK(spec);
  const Process& p = spec->process;
  EXPECT_TRUE(p.terminal);
  ASSERT_TRUE(p.console_size.has_value());
  EXPECT_EQ(p.console_size->height, 40u);
  EXPECT_EQ(p.console_size->width, 120u);
  EXPECT_EQ(p.user.uid, 1000u);
  EXPECT_EQ(p.user.gid, 1001u);
  EXPECT_EQ(p.user.umask, 18u);
  EXPECT_EQ(p.user.additional_gids, (std::vector<uint32_t>{10, 20}));
  EXPECT_EQ(p.args, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_EQ(p.cwd, "/work");
  ASSERT_TRUE(p.capabilities.has_value());
  EXPECT_EQ(p.capabilities->bounding, (std::vector<int>{0, 5}));
  EXPECT_EQ(p.capabilities->ambient, (std::vector<int>{5}));
  ASSERT_EQ(p.rlimits.size(), 1u);
  EXPECT_EQ(p.rlimits[0].resource, RLIMIT_NOFILE);
  EXPECT_EQ(p.rlimits[0].soft, 512u);
  EXPECT_TRUE(p.no_new_privileges);
  EXPECT_EQ(p.oom_score_adj, 500);
  EXPECT_EQ(spec->root.path, "rootfs");
  EXPECT_TRUE(spec->root.readonly);
  EXPECT_EQ(spec->hostname, "pod-a");
  ASSERT_EQ(spec->mounts.size(), 2u);
  EXPECT_EQ(spec->mounts[1].options, (std::vector<std::string>{"rbind", "rprivate", "ro"}));
  ASSERT_EQ(spec->hooks.prestart.size(), 1u);
  EXPECT_EQ(spec->hooks.prestart[0].timeout, 5);
  EXPECT_EQ(spec->annotations.at("io.kubernetes.cri.container-type"), "sandbox");
}

TEST(OciSpecTest, ParsesLinuxSection) {
  auto spec = ParseSpec(kFullSpec);
  ASSERT_OK(spec);
  const Linux& l = spec->linux;
  ASSERT_EQ(l.namespaces.size(), 6u);
  EXPECT_EQ(l.namespaces[1].type, NamespaceType::kIpc);
  EXPECT_EQ(l.namespaces[1].path, "/proc/1/ns/ipc");
  ASSERT_TRUE(l.resources.has_value());
  EXPECT_EQ(l.resources->memory->limit, 67108864);
  EXPECT_EQ(l.resources->memory->swap, -1);
  EXPECT_EQ(l.resources->cpu->quota, 50000);
  EXPECT_EQ(l.resources->cpu->period, 100000u);
  EXPECT_EQ(l.resources->cpu->shares, 512u);
  EXPECT_EQ(l.resources->pids->limit, 64);
  EXPECT_EQ(l.resources->block_io->weight, 500);
  EXPECT_EQ(l.resources->block_io->throttle_read_bps_device.at(0).rate, 1000u);
  EXPECT_EQ(l.resources->unified.at("memory.high"), "max");
  EXPECT_EQ(l.cgroups_path, "/kubepods/pod1/ctr1");
  EXPECT_EQ(l.devices.at(0).file_mode, 438u);
  EXPECT_EQ(l.sysctl.at("net.ipv4.ip_forward"), "1");
  EXPECT_EQ(l.masked_paths.size(), 2u);
  EXPECT_EQ(l.rootfs_propagation, "rslave");
  ASSERT_TRUE(l.seccomp.has_value());
  EXPECT_EQ(l.seccomp->default_action, SeccompAction::kErrno);
  EXPECT_EQ(l.seccomp->default_errno_ret, 38u);
  ASSERT_EQ(l.seccomp->syscalls.size(), 3u);
  const auto& personality = l.seccomp->syscalls[1];
  ASSERT_EQ(personality.args.size(), 2u);
  EXPECT_EQ(personality.args[1].op, SeccompOp::kMaskedEqual);
  EXPECT_EQ(personality.args[1].value_two, 3u);
  EXPECT_EQ(l.seccomp->syscalls[2].errno_ret, 1u);
}

TEST(OciSpecTest, MinimalSpecGetsDefaults) {
  auto spec = ParseSpec(R"({"root": {"path": "/r"}, "process": {"args": ["true"], "cwd": "/"}})");
  ASSERT_OK(spec);
  EXPECT_FALSE(spec->root.readonly);
  EXPECT_FALSE(spec->process.terminal);
  EXPECT_FALSE(spec->process.capabilities.has_value());
  EXPECT_TRUE(spec->linux.namespaces.empty());
  EXPECT_FALSE(spec->linux.seccomp.has_value());
  EXPECT_TRUE(spec->hooks.empty());
}

struct BadSpecCase {
  const char* name;
  std::string json;
  std::string want;  // substring of the error message
};

std::string WithProcess(const std::string& process) {
  return R"({"root": {"path": "/r"}, "process": )" + process + "}";
}

std::string WithLinux(const std::string& linux_json) {
  return R"({"root": {"path": "/r"}, "process": {"args": ["true"], "cwd": "/"}, "linux": )" +
         linux_json + "}";
}

class BadSpecTest : public ::testing::TestWithParam<BadSpecCase> {};

TEST_P(BadSpecTest, IsRejectedNamingTheField) {
  auto spec = ParseSpec(GetParam().json);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), Code::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(GetParam().want), std::string::npos)
      << "got: " << spec.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BadSpecTest,
    ::testing::Values(
        BadSpecCase{"BadJson", "{\"root\": ", "invalid JSON"},
        // A number no double holds threw out_of_range past the parser.
        BadSpecCase{"NumberOverflow", R"({"root": {"path": "/r"}, "x": 1e400})", "number overflow"},
        BadSpecCase{"NotAnObject", "[1, 2]", "(root): must be an object"},
        BadSpecCase{"MissingProcess", R"({"root": {"path": "/r"}})", "process: required"},
        BadSpecCase{"MissingRoot", R"({"process": {"args": ["a"], "cwd": "/"}})", "root: required"},
        BadSpecCase{"ArgNotString", WithProcess(R"({"args": ["sh", 5], "cwd": "/"})"),
                    "process.args[1]: must be a string"},
        BadSpecCase{"EmptyArgs", WithProcess(R"({"args": [], "cwd": "/"})"), "process.args: must not be empty"},
        BadSpecCase{"RelativeCwd", WithProcess(R"({"args": ["a"], "cwd": "tmp"})"),
                    "process.cwd: must be an absolute path"},
        BadSpecCase{"NegativeUid", WithProcess(R"({"args": ["a"], "cwd": "/", "user": {"uid": -1}})"),
                    "process.user.uid: must be between 0 and 4294967295, got -1"},
        BadSpecCase{"FloatGid", WithProcess(R"({"args": ["a"], "cwd": "/", "user": {"gid": 1.5}})"),
                    "process.user.gid: must be an integer"},
        BadSpecCase{"UnknownCap",
                    WithProcess(R"({"args": ["a"], "cwd": "/", "capabilities": {"bounding": ["CAP_FLY"]}})"),
                    "process.capabilities.bounding[0]: unknown capability \"CAP_FLY\""},
        BadSpecCase{"UnknownRlimit",
                    WithProcess(R"({"args": ["a"], "cwd": "/", "rlimits": [{"type": "RLIMIT_X", "hard": 1, "soft": 1}]})"),
                    "process.rlimits[0].type: unknown rlimit"},
        BadSpecCase{"RlimitSoftAboveHard",
                    WithProcess(R"({"args": ["a"], "cwd": "/", "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1, "soft": 2}]})"),
                    "process.rlimits[0].soft: must not exceed hard"},
        BadSpecCase{"OomScoreRange", WithProcess(R"({"args": ["a"], "cwd": "/", "oomScoreAdj": 2000})"),
                    "process.oomScoreAdj: must be between -1000 and 1000"},
        BadSpecCase{"MountRelative",
                    R"({"root": {"path": "/r"}, "process": {"args": ["a"], "cwd": "/"}, "mounts": [{"destination": "proc"}]})",
                    "mounts[0].destination: must be an absolute path"},
        BadSpecCase{"UnknownNamespace", WithLinux(R"({"namespaces": [{"type": "pid"}, {"type": "bogus"}]})"),
                    "linux.namespaces[1].type: unknown namespace type \"bogus\""},
        BadSpecCase{"DuplicateNamespace", WithLinux(R"({"namespaces": [{"type": "pid"}, {"type": "pid"}]})"),
                    "linux.namespaces[1].type: duplicate namespace"},
        BadSpecCase{"MemoryLimitString", WithLinux(R"({"resources": {"memory": {"limit": "1G"}}})"),
                    "linux.resources.memory.limit: must be an integer"},
        BadSpecCase{"PidsWithoutLimit", WithLinux(R"({"resources": {"pids": {}}})"),
                    "linux.resources.pids.limit: required"},
        BadSpecCase{"BadPropagation", WithLinux(R"({"rootfsPropagation": "sideways"})"),
                    "linux.rootfsPropagation: unknown propagation"},
        BadSpecCase{"SeccompNoDefault", WithLinux(R"({"seccomp": {"syscalls": []}})"),
                    "linux.seccomp.defaultAction: required"},
        BadSpecCase{"SeccompBadAction",
                    WithLinux(R"({"seccomp": {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "NOPE"}]}})"),
                    "linux.seccomp.syscalls[0].action: unknown seccomp action \"NOPE\""},
        BadSpecCase{"SeccompArgIndex",
                    WithLinux(R"({"seccomp": {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 6, "value": 0, "op": "SCMP_CMP_EQ"}]}]}})"),
                    "linux.seccomp.syscalls[0].args[0].index: must be between 0 and 5"},
        BadSpecCase{"SeccompBadOp",
                    WithLinux(R"({"seccomp": {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_ALMOST"}]}]}})"),
                    "linux.seccomp.syscalls[0].args[0].op: unknown seccomp operator"},
        BadSpecCase{"DeviceType", WithLinux(R"({"devices": [{"path": "/dev/x", "type": "q", "major": 1, "minor": 1}]})"),
                    "linux.devices[0].type: must be one of c, b, u, p"},
        BadSpecCase{"SysctlNotString", WithLinux(R"({"sysctl": {"kernel.x": 1}})"),
                    "linux.sysctl.kernel.x: must be a string"}),
    [](const ::testing::TestParamInfo<BadSpecCase>& tc) { return tc.param.name; });

TEST(OciSpecTest, ParsesStandaloneProcess) {
  auto p = ParseProcess(R"({"args": ["ls", "-l"], "cwd": "/", "env": ["A=1"], "terminal": false})");
  ASSERT_OK(p);
  EXPECT_EQ(p->args[1], "-l");
  EXPECT_EQ(p->env, std::vector<std::string>{"A=1"});

  auto bad = ParseProcess(R"({"args": ["ls", null], "cwd": "/"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "args[1]: must be a string");
}

TEST(OciSpecTest, ParsesStandaloneResources) {
  auto r = ParseLinuxResources(R"({"memory": {"limit": 1048576}, "cpu": {"quota": -1, "period": 100000}})");
  ASSERT_OK(r);
  EXPECT_EQ(r->memory->limit, 1048576);
  EXPECT_EQ(r->cpu->quota, -1);
  EXPECT_FALSE(r->pids.has_value());

  auto bad = ParseLinuxResources(R"({"cpu": {"shares": -5}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cpu.shares: must be between 0 and"), std::string::npos)
      << bad.status().message();
}

TEST(OciSpecTest, NameTables) {
  EXPECT_EQ(CapabilityFromName("CAP_CHOWN"), 0);
  EXPECT_EQ(CapabilityFromName("CAP_CHECKPOINT_RESTORE"), 40);
  EXPECT_EQ(CapabilityFromName("chown"), -1);
  EXPECT_EQ(CapabilityName(21), "CAP_SYS_ADMIN");
  EXPECT_EQ(CapabilityName(99), "");
  EXPECT_EQ(RlimitFromName("RLIMIT_NOFILE"), RLIMIT_NOFILE);
  EXPECT_EQ(RlimitFromName("NOFILE"), -1);
}

}  // namespace
}  // namespace capsule::oci
