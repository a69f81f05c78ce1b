// SandboxVm::Boot failing at each stage, with real parts: the error names
// what was wrong and nothing is left (no QEMU, virtiofsd or capsule-vsockd,
// no mount, no socket, no memfd, no state dir). None of these boots a
// guest to the end.
#include <gtest/gtest.h>
#include <signal.h>

#include <future>

#include "runtime/common/daemon.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/vm/sandbox_vm.h"
#include "tests/integration/vm/vm_test_env.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::TestConfigOverrides;
using testing::TestEnv;

std::unique_ptr<TestEnv> MakeEnv(const TestConfigOverrides& o = {}) {
  auto env = TestEnv::Create(o);
  EXPECT_TRUE(env.ok()) << env.status().ToString();
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
  ASSERT_TRUE(pid_text.ok()) << pid_text.status().ToString();
  pid_t qemu = static_cast<pid_t>(std::atoi(pid_text->c_str()));
  ASSERT_GT(qemu, 0);
  ASSERT_EQ(::kill(qemu, SIGKILL), 0);
  auto killed_at = Clock::now();

  ASSERT_EQ(booting.wait_for(milliseconds(30000)), std::future_status::ready);
  auto vm = booting.get();
  auto noticed = Clock::now() - killed_at;
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kUnavailable) << vm.status().ToString();
  EXPECT_NE(vm.status().message().find("the VMM exited while the guest was booting"), std::string::npos)
      << vm.status().message();
  EXPECT_NE(vm.status().message().find("killed or crashed"), std::string::npos) << vm.status().message();
  // "At once": the exit fd, not the boot deadline (120 s here), ended the
  // wait; the rest is tearing down virtiofsd and capsule-vsockd.
  EXPECT_LT(noticed, milliseconds(10000));
  ExpectNothingLeft(*env);
}

TEST(SandboxVmBootFailure, SecondBootOfTheSameIdIsRefusedWithoutHarm) {
  auto env = MakeEnv();
  ASSERT_TRUE(env);
  std::string dir = SandboxVm::StateDirFor(env->config(), "taken");
  ASSERT_TRUE(MkdirAll(dir).ok());
  ASSERT_TRUE(WriteFile(dir + "/keep", "someone else's").ok());
  auto vm = SandboxVm::Boot(env->config(), Spec("taken"));
  EXPECT_EQ(vm.status().code(), Code::kAlreadyExists) << vm.status().ToString();
  EXPECT_EQ(*ReadFile(dir + "/keep"), "someone else's");
  ASSERT_TRUE(RemoveAll(dir).ok());
}

}  // namespace
}  // namespace capsule::vm
