// SandboxVm::Boot failing at each stage, with real parts: the error names
// what was wrong and nothing is left (no QEMU, virtiofsd or capsule-vsockd,
// no mount, no socket, no memfd, no state dir). None of these boots a
// guest to the end.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>

#include <cstring>
#include <future>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/vm/sandbox_vm.h"
#include "tests/integration/vm/vm_test_env.h"
#include "tests/support/status_matchers.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::TestConfigOverrides;
using testing::TestEnv;

std::unique_ptr<TestEnv> MakeEnv(const TestConfigOverrides& o = {}) {
  auto env = TestEnv::Create(o);
  EXPECT_OK(env);
  return env.ok() ? std::move(*env) : nullptr;
}

void ExpectNothingLeft(const TestEnv& env) {
  EXPECT_TRUE(env.Leftovers().empty()) << ::testing::PrintToString(env.Leftovers());
  EXPECT_EQ(testing::MemfdsHeldByUs(), "");
}

SandboxVmSpec Spec(std::string id) {
  SandboxVmSpec s;
  s.id = std::move(id);
  return s;
}

TEST(SandboxVmBootFailure, MissingKernelIsNamedBeforeAnythingStarts) {
  TestConfigOverrides o;
  o.kernel = "/nonexistent/capsule/vmlinuz";
  auto env = MakeEnv(o);
  ASSERT_TRUE(env);
  auto vm = SandboxVm::Boot(env->config(), Spec("no-kernel"));
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kNotFound) << vm.status().ToString();
  EXPECT_NE(vm.status().message().find("guest.kernel /nonexistent/capsule/vmlinuz"), std::string::npos)
      << vm.status().message();
  ExpectNothingLeft(*env);
}

TEST(SandboxVmBootFailure, InvalidIdAndOversizedVmAreRejected) {
  auto env = MakeEnv();
  ASSERT_TRUE(env);
  auto bad = SandboxVm::Boot(env->config(), Spec("../escape"));
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'../escape'"), std::string::npos) << bad.status().message();
  SandboxVmSpec big = Spec("too-big");
  big.vcpus = env->config().guest.max_vcpus + 1;
  auto vm = SandboxVm::Boot(env->config(), big);
  EXPECT_EQ(vm.status().code(), Code::kInvalidArgument);
  EXPECT_NE(vm.status().message().find("guest.max_vcpus"), std::string::npos) << vm.status().message();
  ExpectNothingLeft(*env);
}

TEST(SandboxVmBootFailure, BadQemuPathTearsDownTheHostEnds) {
  TestConfigOverrides o;
  o.qemu = "/nonexistent/qemu-system-x86_64";
  auto env = MakeEnv(o);
  ASSERT_TRUE(env);
  auto vm = SandboxVm::Boot(env->config(), Spec("bad-qemu"));
  ASSERT_FALSE(vm.ok());
  EXPECT_NE(vm.status().message().find("/nonexistent/qemu-system-x86_64"), std::string::npos)
      << vm.status().message();
  ExpectNothingLeft(*env);
}

TEST(SandboxVmBootFailure, GuestNotAnsweringInTimeIsDeadlineExceeded) {
  TestConfigOverrides o;
  o.boot_timeout_ms = 2500;  // a TCG boot takes 10 s and more
  auto env = MakeEnv(o);
  ASSERT_TRUE(env);
  auto t0 = Clock::now();
  auto vm = SandboxVm::Boot(env->config(), Spec("too-slow"));
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kDeadlineExceeded) << vm.status().ToString();
  EXPECT_NE(vm.status().message().find("runtime.boot_timeout_ms 2500"), std::string::npos) << vm.status().message();
  EXPECT_LT(Clock::now() - t0, milliseconds(2500 + 15000));
  ExpectNothingLeft(*env);
}

TEST(SandboxVmBootFailure, QemuKilledMidBootIsNoticedAtOnce) {
  auto env = MakeEnv();
  ASSERT_TRUE(env);
  testing::LogTap log;
  auto booting = std::async(std::launch::async, [&] { return SandboxVm::Boot(env->config(), Spec("killed")); });
  // Boot is past the VMM's start and waiting for the agent.
  ASSERT_TRUE(log.WaitFor("waiting up to", milliseconds(60000)));
  hypervisor::VmPaths paths(SandboxVm::StateDirFor(env->config(), "killed"));
  auto pid_text = ReadFile(paths.pidfile());
  ASSERT_OK(pid_text);
  pid_t qemu = static_cast<pid_t>(std::atoi(pid_text->c_str()));
  ASSERT_GT(qemu, 0);
  ASSERT_EQ(::kill(qemu, SIGKILL), 0);
  auto killed_at = Clock::now();

  ASSERT_EQ(booting.wait_for(milliseconds(30000)), std::future_status::ready);
  auto vm = booting.get();
  auto noticed = Clock::now() - killed_at;
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kUnavailable) << vm.status().ToString();
  EXPECT_REASON(vm, reason::kVmmExited);
  EXPECT_NE(vm.status().message().find("killed or crashed"), std::string::npos) << vm.status().message();
  // "At once": the exit fd, not the boot deadline (120 s here), ended the
  // wait; the rest is tearing down virtiofsd and capsule-vsockd.
  EXPECT_LT(noticed, milliseconds(10000));
  ExpectNothingLeft(*env);
}

// The launcher SIGKILLed after QEMU started but before it wrote vm.json:
// made here by launching a paused QEMU in a VM's dir, detaching it and
// removing its record. Adopt (what `shim delete` and the pool run) kills
// that QEMU, found by the console log its command line names, and the VM
// it returns, with no VMM and an agent error that says why, stops cleanly.
TEST(SandboxVmBootFailure, AQemuWhoseLaunchNeverRecordedItIsKilledByAdopt) {
  auto env = MakeEnv();
  ASSERT_TRUE(env);
  const config::Config& cfg = env->config();
  hypervisor::VmSpec s;
  s.id = "unrecorded";
  s.state_dir = SandboxVm::StateDirFor(cfg, s.id);
  s.kernel = cfg.guest.kernel;
  s.initrd = cfg.guest.initrd;
  s.kernel_cmdline = "console=ttyS0";
  s.start_paused = true;
  ASSERT_OK(MkdirAll(s.state_dir, 0700));
  auto launched = hypervisor::NewQemuHypervisor(cfg)->Launch(s);
  ASSERT_OK(launched);
  const pid_t qemu = (*launched)->vmm_pid();
  ASSERT_TRUE((*launched)->Detach().ok());
  launched->reset();
  hypervisor::VmPaths paths(s.state_dir);
  ASSERT_EQ(::unlink(paths.record().c_str()), 0);
  ASSERT_EQ(::kill(qemu, 0), 0) << "QEMU should still run";

  auto vm = SandboxVm::Adopt(cfg, s.state_dir);
  ASSERT_OK(vm);
  // Dead at once; gone from /proc once init reaps it (it is not our child).
  for (int i = 0; i < 100 && ::kill(qemu, 0) == 0; ++i) ::usleep(50 * 1000);
  EXPECT_NE(::kill(qemu, 0), 0) << "QEMU pid " << qemu << " survived the adoption";
  EXPECT_LE((*vm)->vmm_pid(), 0);
  auto agent = (*vm)->agent();
  ASSERT_FALSE(agent.ok());
  EXPECT_NE(agent.status().message().find("never finished booting"), std::string::npos) << agent.status().message();
  EXPECT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  vm->reset();
  ExpectNothingLeft(*env);
}

// The state dir's filesystem full or read-only (a small tmpfs over
// runtime.state_dir): a clear error naming what could not be written, and
// nothing half-made in it or outside it.
TEST(SandboxVmBootFailure, AFullOrReadOnlyStateDirIsAClearErrorAndLeavesNothing) {
  struct Case {
    unsigned long flags;
    const char* options;
    const char* want;
  };
  for (const Case& c : {Case{0, "size=4k,mode=0700", "No space left on device"},
                        Case{MS_RDONLY, "mode=0700", "Read-only file system"}}) {
    SCOPED_TRACE(c.want);
    auto env = MakeEnv();
    ASSERT_TRUE(env);
    const std::string state = env->state_dir();
    ASSERT_OK(MkdirAll(state));
    ASSERT_EQ(::mount("tmpfs", state.c_str(), "tmpfs", c.flags, c.options), 0) << std::strerror(errno);
    auto vm = SandboxVm::Boot(env->config(), Spec("full"));
    EXPECT_FALSE(vm.ok()) << "booted on a " << c.want << " state dir";
    if (!vm.ok()) {
      EXPECT_NE(vm.status().message().find(c.want), std::string::npos) << vm.status().ToString();
      EXPECT_NE(vm.status().message().find(state), std::string::npos) << vm.status().ToString();
    }
    if (vm.ok()) (void)(*vm)->Stop(milliseconds(0));  // a VM that did boot stops here
    EXPECT_TRUE(env->VmDirs().empty()) << "left in the state dir: " << ::testing::PrintToString(env->VmDirs());
    ASSERT_EQ(::umount2(state.c_str(), MNT_DETACH), 0) << std::strerror(errno);
    ExpectNothingLeft(*env);
  }
}

TEST(SandboxVmBootFailure, SecondBootOfTheSameIdIsRefusedWithoutHarm) {
  auto env = MakeEnv();
  ASSERT_TRUE(env);
  std::string dir = SandboxVm::StateDirFor(env->config(), "taken");
  ASSERT_OK(MkdirAll(dir));
  ASSERT_OK(WriteFile(dir + "/keep", "someone else's"));
  auto vm = SandboxVm::Boot(env->config(), Spec("taken"));
  EXPECT_EQ(vm.status().code(), Code::kAlreadyExists) << vm.status().ToString();
  EXPECT_EQ(*ReadFile(dir + "/keep"), "someone else's");
  ASSERT_OK(RemoveAll(dir));
}

}  // namespace
}  // namespace capsule::vm
