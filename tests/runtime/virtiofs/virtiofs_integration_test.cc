// Real virtiofsd (and QEMU for the vhost-user handshake): start/stop with no
// leftovers, adoption, and the property the runtime depends on: a mount made
// under the share after virtiofsd started is visible in virtiofsd's own
// mount namespace, i.e. what the guest will see.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/hypervisor/qemu_vmm.h"
#include "runtime/virtiofs/virtiofs_daemon.h"
#include "tests/runtime/hypervisor/vm_test_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::virtiofs {
namespace {

using std::chrono::milliseconds;
using hypervisor::testing::ProcessesMentioning;
using hypervisor::testing::ProcessGone;

bool MountedUnder(const std::string& prefix) {
  auto info = ReadFile("/proc/self/mountinfo");
  return info.ok() && info->find(prefix) != std::string::npos;
}

class VirtiofsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (mounts, namespaces)";
    if (!PathExists(cfg_.virtiofs.daemon)) GTEST_SKIP() << cfg_.virtiofs.daemon << " not installed";
    auto dir = TempDir::Create("vfs-it");
    ASSERT_OK(dir);
    root_ = std::make_unique<TempDir>(std::move(*dir));
    cfg_.runtime.state_dir = root_->path();
    vm_dir_ = root_->Join("vm/v1");
  }
  void TearDown() override {
    if (!root_) return;
    EXPECT_TRUE(ProcessesMentioning(root_->path()).empty()) << "leaked a process";
    EXPECT_FALSE(MountedUnder(root_->path())) << "leaked a mount";
  }
  VirtiofsOptions Options() { return VirtiofsOptions::FromConfig(cfg_, vm_dir_); }

  config::Config cfg_;
  std::unique_ptr<TempDir> root_;
  std::string vm_dir_;
};

// The process that serves requests: virtiofsd forks into its new pid
// namespace and the parent only waits for it.
pid_t ServingProcess(pid_t outer) {
  auto children = ReadFile("/proc/" + std::to_string(outer) + "/task/" + std::to_string(outer) + "/children");
  if (!children.ok() || children->empty()) return outer;
  return static_cast<pid_t>(std::atoi(children->c_str()));
}

TEST_F(VirtiofsTest, StartServesTheShareAndStopLeavesNothing) {
  auto d = VirtiofsDaemon::Start(Options());
  ASSERT_OK(d);
  VirtiofsPaths p(vm_dir_);
  EXPECT_EQ((*d)->socket_path(), p.socket());
  struct stat st{};
  ASSERT_EQ(::stat(p.socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_TRUE(IsMountPoint(p.share()));
  EXPECT_EQ(std::atoi(ReadFile(p.pidfile())->c_str()), (*d)->pid());
  EXPECT_TRUE((*d)->running());
  EXPECT_EQ(VirtiofsDaemon::Start(Options()).status().code(), Code::kAlreadyExists);

  pid_t pid = (*d)->pid();
  int exit_fd = (*d)->exit_fd();
  ASSERT_TRUE((*d)->Stop().ok());
  EXPECT_TRUE(PidfdExited(exit_fd) || ProcessGone(pid));
  EXPECT_FALSE(PathExists(vm_dir_));
}

TEST_F(VirtiofsTest, QemuRealizesVhostUserFsAndLateMountsReachVirtiofsd) {
  auto d = VirtiofsDaemon::Start(Options());
  ASSERT_OK(d);
  hypervisor::QemuHypervisor hv(cfg_);
  hypervisor::VmSpec spec;
  spec.id = "v1";
  spec.state_dir = vm_dir_;
  spec.memory_mib = 128;
  spec.start_paused = true;
  spec.devices = {hypervisor::FsShare{"fs0", (*d)->socket_path(), "capsule-shared", 1024}};
  auto vm = hv.Launch(spec);
  ASSERT_OK(vm);
  // Realized: QEMU finished the vhost-user handshake before QMP came up.
  auto* qmp = static_cast<hypervisor::QemuVmm&>(**vm).qmp();
  auto tag = qmp->Execute("qom-get", nlohmann::json{{"path", "/machine/peripheral/fs0"}, {"property", "tag"}});
  ASSERT_OK(tag);
  EXPECT_EQ(*tag, "capsule-shared");

  // A "container rootfs" bind-mounted under the share after virtiofsd started.
  ASSERT_OK(MkdirAll(root_->Join("rootfs-src")));
  ASSERT_OK(WriteFile(root_->Join("rootfs-src/marker"), "from the host"));
  std::string target = (*d)->host_dir() + "/c1";
  ASSERT_OK(MkdirAll(target));
  ASSERT_EQ(::mount(root_->Join("rootfs-src").c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0);
  pid_t serving = ServingProcess((*d)->pid());
  ASSERT_NE(serving, (*d)->pid()) << "virtiofsd should serve from its sandbox child";
  // virtiofsd pivoted into the share: its "/c1/marker" is what the guest reads.
  auto seen = ReadFile("/proc/" + std::to_string(serving) + "/root/c1/marker");
  ASSERT_OK(seen);
  EXPECT_EQ(*seen, "from the host");
  // The guest writes through virtiofsd's view: inside a mount (a rootfs) it
  // may, but the share's own tree is read-only, so it cannot plant a symlink
  // or a directory where the host will mkdir and mount next.
  const std::string view = "/proc/" + std::to_string(serving) + "/root";
  EXPECT_OK(WriteFile(view + "/c1/written-by-guest", "ok"));
  EXPECT_EQ(*ReadFile(root_->Join("rootfs-src/written-by-guest")), "ok");
  errno = 0;
  EXPECT_NE(::symlink("/etc", (view + "/c2").c_str()), 0);
  EXPECT_EQ(errno, EROFS);
  errno = 0;
  EXPECT_NE(::mkdir((view + "/c3").c_str(), 0755), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_NE(::rename((view + "/c1").c_str(), (view + "/c1-moved").c_str()), 0);
  struct statvfs fs {};
  ASSERT_EQ(::statvfs((*d)->share_dir().c_str(), &fs), 0);
  EXPECT_EQ(fs.f_flag & (ST_RDONLY | ST_NOSUID | ST_NODEV), ST_RDONLY | ST_NOSUID | ST_NODEV);
  ASSERT_EQ(::umount(target.c_str()), 0);
  EXPECT_FALSE(PathExists("/proc/" + std::to_string(serving) + "/root/c1/marker"));
  EXPECT_FALSE(PathExists((*d)->share_dir() + "/c1/marker"));

  // virtiofsd serves one connection: it leaves with QEMU.
  int exit_fd = (*d)->exit_fd();
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_TRUE(PidfdWait(exit_fd, 10000));
  EXPECT_FALSE((*d)->running());
  ASSERT_TRUE((*d)->Stop().ok());
  EXPECT_FALSE(PathExists(vm_dir_));
}

TEST_F(VirtiofsTest, StopDetachesMountsStillUnderTheShareWithoutTouchingThem) {
  auto d = VirtiofsDaemon::Start(Options());
  ASSERT_OK(d);
  ASSERT_OK(MkdirAll(root_->Join("src")));
  ASSERT_OK(WriteFile(root_->Join("src/keep"), "keep"));
  std::string target = (*d)->host_dir() + "/c1";
  ASSERT_OK(MkdirAll(target));
  ASSERT_EQ(::mount(root_->Join("src").c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0);
  ASSERT_TRUE((*d)->Stop().ok());
  EXPECT_FALSE(MountedUnder(vm_dir_));
  EXPECT_FALSE(PathExists(vm_dir_));
  EXPECT_EQ(*ReadFile(root_->Join("src/keep")), "keep");  // the bind source is untouched
}

TEST_F(VirtiofsTest, DetachThenAttach) {
  pid_t pid;
  {
    auto d = VirtiofsDaemon::Start(Options());
    ASSERT_OK(d);
    pid = (*d)->pid();
    (*d)->Detach();
  }
  EXPECT_FALSE(ProcessGone(pid));
  EXPECT_TRUE(IsMountPoint(VirtiofsPaths(vm_dir_).share()));
  auto a = VirtiofsDaemon::Attach(vm_dir_);
  ASSERT_OK(a);
  EXPECT_EQ((*a)->pid(), pid);
  EXPECT_TRUE((*a)->running());
  ASSERT_TRUE((*a)->Stop().ok());
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_FALSE(PathExists(vm_dir_));
}

TEST_F(VirtiofsTest, AttachAfterTheDaemonDiedStillCleansUp) {
  {
    auto d = VirtiofsDaemon::Start(Options());
    ASSERT_OK(d);
    ASSERT_OK(PidfdSignal((*d)->exit_fd(), SIGKILL));
    ASSERT_TRUE(PidfdWait((*d)->exit_fd(), 10000));
    (*d)->Detach();
  }
  auto a = VirtiofsDaemon::Attach(vm_dir_);
  ASSERT_OK(a);
  EXPECT_FALSE((*a)->running());
  ASSERT_TRUE((*a)->Stop().ok());
  EXPECT_FALSE(PathExists(vm_dir_));
}

TEST_F(VirtiofsTest, DaemonFailingAtStartReportsItsLogAndLeavesNothing) {
  std::string fake = root_->Join("fake-virtiofsd");
  ASSERT_OK(WriteFile(fake, "#!/bin/sh\necho 'fake-virtiofsd: source is not a directory' >&2\nexit 1\n"));
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  VirtiofsOptions o = Options();
  o.daemon_path = fake;
  auto d = VirtiofsDaemon::Start(o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kUnavailable);
  EXPECT_NE(d.status().message().find("virtiofsd exited during start-up; virtiofsd said: fake-virtiofsd: source is not a directory"),
            std::string::npos)
      << d.status().ToString();
  EXPECT_FALSE(PathExists(vm_dir_));

  ASSERT_OK(WriteFile(fake, "#!/bin/sh\nexec sleep 600.4242\n"));
  o.ready_timeout = milliseconds(300);
  d = VirtiofsDaemon::Start(o);
  EXPECT_EQ(d.status().code(), Code::kDeadlineExceeded) << d.status().ToString();
  EXPECT_FALSE(PathExists(vm_dir_));
  EXPECT_TRUE(ProcessesMentioning("sleep 600.4242").empty()) << "the never-ready daemon must be killed";
}

}  // namespace
}  // namespace capsule::virtiofs
