// The process's confinement: user and groups, env and cwd, read-only rootfs,
// masked and read-only paths, seccomp (errno, argument conditions),
// capabilities, no_new_privs, rlimits.
#include <pthread.h>
#include <signal.h>

#include <algorithm>

#include "runtime/common/file_util.h"
#include "tests/agent/engine/engine_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine::testing {
namespace {

TEST_F(EngineTest, EnvCwdUserAndGroups) {
  auto spec = DefaultSpec({"sh", "-c", "echo $FOO; pwd; id -u; id -g; id -G"});
  spec["process"]["env"].push_back("FOO=bar");
  spec["process"]["cwd"] = "/tmp/work";
  spec["process"]["user"] = {{"uid", 1000}, {"gid", 1001}, {"additionalGids", {10, 20}}};
  RunResult r = Run("user", spec);
  EXPECT_EQ(r.out, "bar\n/tmp/work\n1000\n1001\n1001 10 20\n") << r.err;
  EXPECT_EQ(r.exit.status, 0);
}

TEST_F(EngineTest, UmaskApplies) {
  auto spec = DefaultSpec({"sh", "-c", "umask"});
  spec["process"]["user"]["umask"] = 077;
  EXPECT_EQ(Run("umask", spec).out, "0077\n");
}

TEST_F(EngineTest, ReadonlyRootfsRefusesWrites) {
  auto spec = DefaultSpec({"sh", "-c", "touch /newfile; touch /tmp/ok && echo tmp-writable"});
  spec["root"]["readonly"] = true;
  RunResult r = Run("rofs", spec);
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "tmp-writable\n");
}

TEST_F(EngineTest, MaskedPathsAreEmpty) {
  auto spec = DefaultSpec({"sh", "-c", "wc -c < /proc/timer_list; ls -A /sys/firmware | wc -l; touch /sys/firmware/x"});
  RunResult r = Run("masked", spec);
  EXPECT_EQ(r.out, "0\n0\n");
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
}

TEST_F(EngineTest, ReadonlyPathsRefuseWrites) {
  // Harmless even if it failed: the container has its own UTS namespace.
  RunResult r = Run("ropaths", DefaultSpec({"sh", "-c", "cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname"}));
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_NE(r.exit.status, 0);
}

TEST_F(EngineTest, SeccompErrnoRetDeniesMkdir) {
  auto spec = DefaultSpec({"sh", "-c", "mkdir /tmp/d && echo made; echo after"});
  spec["linux"]["seccomp"] = {
      {"defaultAction", "SCMP_ACT_ALLOW"},
      {"architectures", {"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"}},
      {"syscalls", {{{"names", {"mkdir", "mkdirat"}}, {"action", "SCMP_ACT_ERRNO"}, {"errnoRet", 1}}}}};
  RunResult r = Run("seccomp", spec);
  EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "after\n");
}

TEST_F(EngineTest, SeccompArgumentConditions) {
  auto spec = DefaultSpec({"sh", "-c", "touch /tmp/f; chmod 755 /tmp/f && echo ok755; chmod 777 /tmp/f || echo denied777"});
  spec["process"]["noNewPrivileges"] = true;  // exercises loading right before execve
  nlohmann::json mode777 = {{"value", 0777}, {"op", "SCMP_CMP_EQ"}};
  spec["linux"]["seccomp"] = {
      {"defaultAction", "SCMP_ACT_ALLOW"},
      {"syscalls",
       {{{"names", {"chmod"}}, {"action", "SCMP_ACT_ERRNO"}, {"args", {{{"index", 1}, {"value", 0777}, {"op", "SCMP_CMP_EQ"}}}}},
        {{"names", {"fchmodat"}}, {"action", "SCMP_ACT_ERRNO"}, {"args", {{{"index", 2}, {"value", 0777}, {"op", "SCMP_CMP_EQ"}}}}}}}};
  RunResult r = Run("seccomp-args", spec);
  EXPECT_EQ(r.out, "ok755\ndenied777\n") << r.err;
}

TEST_F(EngineTest, DroppedCapChownMakesChownFail) {
  const std::string script = "touch /tmp/f; chown 1:1 /tmp/f && echo chowned";
  RunResult with = Run("cap-with", DefaultSpec({"sh", "-c", script}));
  EXPECT_EQ(with.out, "chowned\n") << with.err;
  auto spec = DefaultSpec({"sh", "-c", script + "; grep CapEff /proc/self/status"});
  auto& caps = spec["process"]["capabilities"];
  for (const char* set : {"bounding", "effective", "permitted"}) {
    auto& list = caps[set];
    list.erase(std::remove(list.begin(), list.end(), "CAP_CHOWN"), list.end());
  }
  RunResult without = Run("cap-without", spec);
  EXPECT_NE(without.err.find("Operation not permitted"), std::string::npos) << without.err;
  EXPECT_EQ(without.out.find("chowned"), std::string::npos);
  EXPECT_NE(without.out.find("CapEff:\t00000000a80425fa"), std::string::npos) << without.out;
}

TEST_F(EngineTest, AmbientCapabilitiesReachNonRootUser) {
  auto spec = DefaultSpec({"sh", "-c", "grep -E 'Cap(Eff|Amb)' /proc/self/status"});
  spec["process"]["user"] = {{"uid", 1000}, {"gid", 1000}};
  spec["process"]["capabilities"] = {{"bounding", {"CAP_NET_BIND_SERVICE"}}, {"effective", {"CAP_NET_BIND_SERVICE"}},
                                     {"permitted", {"CAP_NET_BIND_SERVICE"}}, {"inheritable", {"CAP_NET_BIND_SERVICE"}},
                                     {"ambient", {"CAP_NET_BIND_SERVICE"}}};
  RunResult r = Run("ambient", spec);
  EXPECT_EQ(r.out, "CapEff:\t0000000000000400\nCapAmb:\t0000000000000400\n") << r.err;
}

TEST_F(EngineTest, NoNewPrivilegesIsSet) {
  auto spec = DefaultSpec({"grep", "NoNewPrivs", "/proc/self/status"});
  EXPECT_EQ(Run("nnp-off", spec).out, "NoNewPrivs:\t0\n");
  spec["process"]["noNewPrivileges"] = true;
  EXPECT_EQ(Run("nnp-on", spec).out, "NoNewPrivs:\t1\n");
}

TEST_F(EngineTest, RlimitNofileVisibleToUlimit) {
  auto spec = DefaultSpec({"sh", "-c", "ulimit -n; ulimit -Hn"});
  spec["process"]["rlimits"] = {{{"type", "RLIMIT_NOFILE"}, {"soft", 256}, {"hard", 512}}};
  EXPECT_EQ(Run("rlimit", spec).out, "256\n512\n");
}

TEST_F(EngineTest, SignalDispositionsAreReset) {
  // An agent ignoring or blocking signals must not hand that to its
  // containers: neither SIGPIPE, nor a real-time signal, nor a blocked one.
  const int rt = SIGRTMIN + 2;
  auto old_pipe = ::signal(SIGPIPE, SIG_IGN);
  auto old_rt = ::signal(rt, SIG_IGN);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  RunResult r = Run("sigpipe", DefaultSpec({"grep", "-E", "Sig(Ign|Blk)", "/proc/self/status"}));
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::signal(rt, old_rt);
  ::signal(SIGPIPE, old_pipe);
  EXPECT_EQ(r.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n")
      << "exit " << r.exit.status << ", stderr: " << r.err;
}

}  // namespace
}  // namespace capsule::engine::testing

namespace capsule::engine::testing {
namespace {

TEST_F(EngineTest, FileBindMountIsReadOnly) {
  auto dir = TempDir::Create("bindsrc");
  ASSERT_OK(dir);
  ASSERT_OK(WriteFile(dir->Join("hosts"), "10.0.0.1 pod\n"));
  auto spec = DefaultSpec({"sh", "-c", "cat /etc/hosts-test; echo x >> /etc/hosts-test"});
  spec["mounts"].push_back({{"destination", "/etc/hosts-test"}, {"type", "bind"}, {"source", dir->Join("hosts")},
                            {"options", {"rbind", "rprivate", "ro"}}});
  RunResult r = Run("bindfile", spec);
  EXPECT_EQ(r.out, "10.0.0.1 pod\n");
  EXPECT_NE(r.err.find("Read-only file system"), std::string::npos) << r.err;
  EXPECT_EQ(*ReadFile(dir->Join("hosts")), "10.0.0.1 pod\n");
}

TEST_F(EngineTest, MountTargetsCannotEscapeTheRootfsThroughSymlinks) {
  // An image symlink to an absolute path resolves inside the rootfs.
  const std::string link = BusyboxRootfs() + "/hostetc";
  (void)!::symlink("/etc", link.c_str());
  auto spec = DefaultSpec({"sh", "-c", "grep -c ' /etc/capsule-probe ' /proc/self/mountinfo"});
  spec["mounts"].push_back({{"destination", "/hostetc/capsule-probe"}, {"type", "tmpfs"}, {"source", "tmpfs"}});
  RunResult r = Run("escape", spec);
  EXPECT_EQ(r.out, "1\n") << r.err;
  EXPECT_FALSE(PathExists("/etc/capsule-probe")) << "a mount point was created outside the rootfs";
  EXPECT_TRUE(PathExists(BusyboxRootfs() + "/etc/capsule-probe"));
  ::rmdir((BusyboxRootfs() + "/etc/capsule-probe").c_str());
}

}  // namespace
}  // namespace capsule::engine::testing
