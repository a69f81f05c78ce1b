// The capsule-runtime binary: `check` on this host (real accelerator probe,
// QEMU, virtiofsd), `check` with a missing kernel, and `vm boot --keep`,
// `vm ls`, `vm stop` on one real VM.
#include <gtest/gtest.h>

#include "runtime/host/run_capture.h"
#include "runtime/hypervisor/accel_probe.h"
#include "tests/integration/vm/vm_test_env.h"
#include "tests/support/status_matchers.h"

namespace capsule::cli {
namespace {

using std::chrono::milliseconds;
using vm::testing::TestConfigOverrides;
using vm::testing::TestEnv;

constexpr milliseconds kCheckTimeout{60000};
constexpr milliseconds kBootTimeout{180000};

Captured RunCli(const TestEnv& env, std::vector<std::string> args, milliseconds timeout = kCheckTimeout) {
  std::vector<std::string> argv = {CAPSULE_RUNTIME_BIN, "--config", env.config_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunAndCapture(argv, timeout);
  EXPECT_OK(r);
  return r.ok() ? *r : Captured{};
}

std::unique_ptr<TestEnv> MakeEnv(const TestConfigOverrides& o = {}) {
  auto env = TestEnv::Create(o);
  EXPECT_OK(env);
  return env.ok() ? std::move(*env) : nullptr;
}

bool Has(const Captured& c, std::string_view s) { return c.output.find(s) != std::string::npos; }

TEST(RuntimeCli, VersionAndHelp) {
  auto env = MakeEnv();
  ASSERT_TRUE(env);
  auto v = RunCli(*env, {"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_TRUE(Has(v, "capsule-runtime ")) << v.output;
  auto sv = RunCli(*env, {"vm", "stop", "--version"});
  EXPECT_EQ(sv.exit_code, 0);
  EXPECT_TRUE(Has(sv, "capsule-runtime ")) << sv.output;
  auto h = RunCli(*env, {"vm", "boot", "--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_TRUE(Has(h, "--keep") && Has(h, "--vcpus") && Has(h, "--memory")) << h.output;
}

TEST(RuntimeCli, CheckReportsTheAcceleratorAndWhyAndPasses) {
  auto env = MakeEnv();
  ASSERT_TRUE(env);
  auto c = RunCli(*env, {"check"});
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_TRUE(Has(c, "verdict: this host can run Capsule pods")) << c.output;
  EXPECT_TRUE(Has(c, "vhost-user-vsock-pci, vhost-user-fs-pci, virtio-net-pci, pcie-root-port, virtio-serial-pci, virtserialport")) << c.output;
  EXPECT_TRUE(Has(c, "capsule-vsockd")) << c.output;
  // What the vsock back end and this QEMU mean for copy-on-write clones.
  EXPECT_TRUE(Has(c, "hot-plugged into clones")) << c.output;  // auto: vhost-user or kernel
  EXPECT_TRUE(Has(c, "[ok]   template RAM")) << c.output;
  EXPECT_TRUE(Has(c, "virtio-fs (guest.device_set)")) << c.output;
  EXPECT_TRUE(Has(c, vm::testing::GuestKernel())) << c.output;
  EXPECT_TRUE(Has(c, "virtiofsd version")) << c.output;
  // What this host really is decides what must be reported.
  auto kvm = hypervisor::JudgeKvm(hypervisor::GatherKvmFacts());
  if (kvm.kvm_usable) {
    EXPECT_TRUE(Has(c, "accelerator     KVM: ")) << c.output;
  } else {
    EXPECT_TRUE(Has(c, "[warn] accelerator     TCG: KVM unusable: ")) << c.output;
    EXPECT_TRUE(Has(c, "-> TCG")) << c.output;
    EXPECT_TRUE(Has(c, "!!! WARNING: VMs run under TCG")) << c.output;
  }
}

TEST(RuntimeCli, CheckSaysWhatTheDenseDeviceSetUses) {
  TestConfigOverrides o;
  o.device_set = "dense";
  auto env = MakeEnv(o);
  ASSERT_TRUE(env);
  auto c = RunCli(*env, {"check"});
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_TRUE(Has(c, "[ok]   device set      dense (guest.device_set): copy-on-write clones of a sealed template"))
      << c.output;
  EXPECT_TRUE(Has(c, env->root() + "/images")) << c.output;
  EXPECT_TRUE(Has(c, "a virtio-serial port: private guest RAM possible")) << c.output;  // auto means serial here
  EXPECT_FALSE(Has(c, "virtiofsd version")) << "a dense host needs no virtiofsd:\n" << c.output;
}

TEST(RuntimeCli, CheckFailsNamingAMissingKernel) {
  TestConfigOverrides o;
  o.kernel = "/nonexistent/capsule/vmlinuz";
  auto env = MakeEnv(o);
  ASSERT_TRUE(env);
  auto c = RunCli(*env, {"check"});
  EXPECT_EQ(c.exit_code, 1) << c.output;
  EXPECT_TRUE(Has(c, "[FAIL] guest kernel    guest.kernel /nonexistent/capsule/vmlinuz: No such file or directory"))
      << c.output;
  EXPECT_TRUE(Has(c, "verdict: this host cannot run Capsule pods: guest kernel: guest.kernel "
                     "/nonexistent/capsule/vmlinuz"))
      << c.output;
}

TEST(RuntimeCli, VmBootKeepThenLsThenStop) {
  auto env = MakeEnv();
  ASSERT_TRUE(env);
  auto boot = RunCli(*env, {"vm", "boot", "--id", "cli-vm", "--keep", "--memory", "256"}, kBootTimeout);
  ASSERT_EQ(boot.exit_code, 0) << boot.output;
  EXPECT_TRUE(Has(boot, "VM cli-vm booted")) << boot.output;
  EXPECT_TRUE(Has(boot, "agent: capsule-agent ")) << boot.output;
  EXPECT_TRUE(Has(boot, "boot: ") && Has(boot, "prepare ") && Has(boot, "kernel and agent ")) << boot.output;
  EXPECT_TRUE(Has(boot, "left running")) << boot.output;

  auto ls = RunCli(*env, {"vm", "ls"});
  EXPECT_EQ(ls.exit_code, 0) << ls.output;
  EXPECT_TRUE(Has(ls, "cli-vm") && Has(ls, "running")) << ls.output;

  auto stop = RunCli(*env, {"vm", "stop", "cli-vm"}, kBootTimeout);
  EXPECT_EQ(stop.exit_code, 0) << stop.output;
  EXPECT_TRUE(Has(stop, "VM cli-vm stopped")) << stop.output;
  EXPECT_TRUE(env->Leftovers().empty()) << ::testing::PrintToString(env->Leftovers());

  auto again = RunCli(*env, {"vm", "stop", "cli-vm"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(Has(again, "no VM 'cli-vm'")) << again.output;
}

}  // namespace
}  // namespace capsule::cli
