#include "runtime/host/jail.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "runtime/common/file_util.h"
#include "runtime/host/daemon.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

bool CanJail() { return HaveEffectiveCapabilities({CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID}); }

// Runs `script` under /bin/sh in a jail mounted on dir/root, as `uid`;
// returns what it printed.
Result<std::string> RunJailed(const TempDir& dir, const std::string& script, int64_t uid = -1,
                              std::optional<JailPlan> plan = std::nullopt) {
  const std::string root = dir.Join("root");
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + root);
  UniqueFd out(::open(dir.Join("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return ErrnoStatus("open out");
  DaemonOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.stdout_fd = out.get();
  o.stderr_fd = out.get();
  o.new_mount_namespace = true;
  o.uid = uid;
  if (!plan) {
    JailSpec spec;
    spec.mountpoint = root;
    ASSIGN_OR_RETURN(plan, PlanJail(spec));
  }
  o.jail = std::move(plan);
  ASSIGN_OR_RETURN(Daemon d, SpawnDaemon(o));
  if (!PidfdWait(d.pidfd.get(), 10000)) return DeadlineExceeded("jailed shell still runs");
  return ReadFile(dir.Join("out"));
}

TEST(JailTest, PlanRefusesAMissingMountPointAndNamesIt) {
  JailSpec spec;
  spec.mountpoint = "/nonexistent/jail-root";
  auto plan = PlanJail(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("/nonexistent/jail-root"), std::string::npos);
  spec.mountpoint = "/tmp";
  spec.read_only_dirs = {"/usr/../etc"};
  plan = PlanJail(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("/usr/../etc"), std::string::npos);
}

TEST(JailTest, AJailedDaemonSeesOnlyUsrItsDevicesAndItsOwnProcesses) {
  if (!CanJail()) GTEST_SKIP() << "needs CAP_SYS_ADMIN, CAP_SETUID and CAP_SETGID (run as root)";
  auto dir = TempDir::Create("jail");
  ASSERT_OK(dir);
  ASSERT_OK(WriteFile(dir->Join("host-secret"), "x"));
  // As nobody: what a jailed, unprivileged VMM would see.
  const std::string script =
      "cd /; for f in *; do echo \"root:$f\"; done; for f in /etc/*; do echo \"etc:$f\"; done; "
      "test -e " + dir->Join("host-secret") + " && echo host-visible; "
      "test -e /etc/passwd && echo passwd-visible; "
      "test -x /usr/bin/env && echo usr-ok; "
      "echo hi > /dev/null && echo devnull-ok; "
      "(echo x > /x) 2>/dev/null || echo root-readonly; "
      "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo procs:$n";
  auto out = RunJailed(*dir, script, 65534);
  ASSERT_OK(out);
  std::istringstream lines(*out);
  std::string line;
  int procs = -1;
  while (std::getline(lines, line)) {
    if (line.rfind("root:", 0) == 0) {
      const std::string name = line.substr(5);
      EXPECT_TRUE(name == "usr" || name == "dev" || name == "proc" || name == "sys" || name == "etc" ||
                  name.rfind("lib", 0) == 0 || name == "bin" || name == "sbin")
          << "the jail's root holds " << name << "\n" << *out;
    } else if (line.rfind("etc:", 0) == 0) {
      EXPECT_EQ(line, "etc:/etc/ld.so.cache") << *out;
    } else if (line.rfind("procs:", 0) == 0) {
      procs = std::stoi(line.substr(6));
    }
  }
  EXPECT_EQ(out->find("host-visible"), std::string::npos) << *out;
  EXPECT_EQ(out->find("passwd-visible"), std::string::npos) << *out;
  EXPECT_NE(out->find("usr-ok"), std::string::npos) << *out;
  EXPECT_NE(out->find("devnull-ok"), std::string::npos) << *out;
  EXPECT_NE(out->find("root-readonly"), std::string::npos) << *out;
  // hidepid=2: the shell and its subshells, never the host's processes.
  EXPECT_GE(procs, 1) << *out;
  EXPECT_LE(procs, 4) << *out;
  // The tmpfs and binds lived in the daemon's mount namespace only.
  EXPECT_TRUE(ListDir(dir->Join("root")).empty());
}

// What the jail binds read-only is read-only all the way down: a host
// mount below a bound directory cannot be written from inside, even by root.
TEST(JailTest, MountsBelowABoundDirectoryAreReadOnlyToo) {
  if (!CanJail()) GTEST_SKIP() << "needs CAP_SYS_ADMIN, CAP_SETUID and CAP_SETGID (run as root)";
  auto dir = TempDir::Create("jail");
  ASSERT_OK(dir);
  const std::string tools = dir->Join("tools"), sub = tools + "/writable";
  ASSERT_OK(MkdirAll(sub));
  ASSERT_EQ(::mount("capsule-test", sub.c_str(), "tmpfs", 0, "size=64k"), 0) << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{sub};
  ASSERT_OK(WriteFile(sub + "/host-wrote", "x")) << "the host's own mount is writable";
  JailSpec spec;
  spec.mountpoint = dir->Join("root");
  spec.read_only_dirs.push_back(tools);
  ASSERT_EQ(::mkdir(spec.mountpoint.c_str(), 0755), 0);
  auto plan = PlanJail(spec);
  ASSERT_OK(plan);
  auto out = RunJailed(*dir, "test -e " + sub + "/host-wrote && echo seen; (echo y > " + sub +
                                 "/jail-wrote) 2>/dev/null && echo written || echo refused",
                       -1, *plan);
  ASSERT_OK(out);
  EXPECT_NE(out->find("seen"), std::string::npos) << *out;
  EXPECT_NE(out->find("refused"), std::string::npos) << *out;
  EXPECT_FALSE(PathExists(sub + "/jail-wrote"));
}

TEST(JailTest, AFailedJailStepIsNamed) {
  if (!CanJail()) GTEST_SKIP() << "needs CAP_SYS_ADMIN, CAP_SETUID and CAP_SETGID (run as root)";
  auto dir = TempDir::Create("jail");
  ASSERT_OK(dir);
  const std::string root = dir->Join("root");
  JailPlan plan;
  plan.mountpoint = root;
  plan.steps.push_back({JailStep::kMountRoot, root, "", false, "mount the new root"});
  plan.steps.push_back({JailStep::kSymlink, root + "/no/such/link", "usr/lib", false, "link /no/such/link"});
  auto out = RunJailed(*dir, "true", -1, std::move(plan));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("enter its jail: link /no/such/link"), std::string::npos)
      << out.status().ToString();
}

TEST(JailTest, AJailNeedsAMountNamespace) {
  JailSpec spec;
  spec.mountpoint = "/tmp";
  auto plan = PlanJail(spec);
  ASSERT_OK(plan);
  DaemonOptions o;
  o.argv = {"/bin/true"};
  o.jail = std::move(*plan);
  auto d = SpawnDaemon(o);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("mount namespace"), std::string::npos) << d.status().ToString();
}

}  // namespace
}  // namespace capsule
