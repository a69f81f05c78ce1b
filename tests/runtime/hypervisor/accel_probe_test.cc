#include "runtime/hypervisor/accel_probe.h"

#include <gtest/gtest.h>

#include "runtime/common/file_util.h"
#include "runtime/hypervisor/kvm_timing.h"
#include "tests/support/status_matchers.h"

namespace capsule::hypervisor {
namespace {

KvmFacts GoodKvm(uint64_t loop_ns = 300'000) {
  KvmFacts f;
  f.dev_kvm_exists = true;
  f.api_version = kKvmApiVersion;
  f.cpu_has_vmx_or_svm = true;
  f.timing = KvmTiming{true, "", kKvmProbeIterations, loop_ns};
  return f;
}

TEST(AccelProbeTest, HealthyKvmIsChosenUnderAutoAndKvm) {
  for (auto req : {config::Accelerator::kAuto, config::Accelerator::kKvm}) {
    auto d = DecideAccelerator(req, GoodKvm());
    ASSERT_OK(d);
    EXPECT_EQ(d->accelerator, Accelerator::kKvm);
    EXPECT_FALSE(d->degraded);
    EXPECT_EQ(d->reason, "KVM ok: 200000-iteration guest loop took 0.30 ms");
  }
}

TEST(AccelProbeTest, EachFailedFactExplainsItself) {
  struct Case {
    std::function<void(KvmFacts&)> breakit;
    std::string reason;
  };
  std::vector<Case> cases = {
      {[](KvmFacts& f) { f.dev_kvm_exists = false; }, "KVM unusable: /dev/kvm absent"},
      {[](KvmFacts& f) { f.dev_kvm_exists = false; f.pvm_module = true; }, "KVM unusable: /dev/kvm absent (kvm_pvm module loaded)"},
      {[](KvmFacts& f) { f.open_errno = EACCES; }, "KVM unusable: cannot open /dev/kvm: Permission denied"},
      {[](KvmFacts& f) { f.api_version = -1; }, "KVM unusable: KVM_GET_API_VERSION returned -1, expected 12"},
      {[](KvmFacts& f) { f.pvm_module = true; f.cpu_has_vmx_or_svm = false; },
       "KVM is the PVM flavour (/sys/module/kvm_pvm): guest kernels run emulated one instruction at a time and a "
       "stock kernel does not boot at usable speed"},
      {[](KvmFacts& f) { f.cpu_has_vmx_or_svm = false; }, "KVM unusable: no vmx/svm flag in /proc/cpuinfo (no hardware virtualization)"},
      {[](KvmFacts& f) { f.timing = KvmTiming{false, "KVM_RUN /dev/kvm: Invalid argument", kKvmProbeIterations, 0}; },
       "KVM unusable: test guest failed: KVM_RUN /dev/kvm: Invalid argument"},
      {[](KvmFacts& f) { f.timing->elapsed_ns = 412'000'000; },
       "KVM unusable: too slow: 200000-iteration guest loop took 412.0 ms (limit 50 ms)"},
  };
  for (const Case& c : cases) {
    KvmFacts f = GoodKvm();
    c.breakit(f);
    AccelDecision j = JudgeKvm(f);
    EXPECT_FALSE(j.kvm_usable) << c.reason;
    EXPECT_EQ(j.reason, c.reason);
  }
}

TEST(AccelProbeTest, AutoFallsBackToTcgLoudly) {
  KvmFacts f;  // no /dev/kvm at all, like this build machine
  auto d = DecideAccelerator(config::Accelerator::kAuto, f);
  ASSERT_OK(d);
  EXPECT_EQ(d->accelerator, Accelerator::kTcg);
  EXPECT_TRUE(d->degraded);
  EXPECT_EQ(d->reason, "KVM unusable: /dev/kvm absent; using TCG (software emulation, roughly 10-50x slower)");
}

TEST(AccelProbeTest, KvmRequestedButUnusableIsAnErrorWithTheReason) {
  KvmFacts f = GoodKvm();
  f.pvm_module = true;
  auto d = DecideAccelerator(config::Accelerator::kKvm, f);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(d.status().message().rfind("accelerator: kvm configured but KVM is the PVM flavour", 0), 0u)
      << d.status().message();
}

TEST(AccelProbeTest, TcgRequestedIsHonouredEvenWithGoodKvm) {
  auto d = DecideAccelerator(config::Accelerator::kTcg, GoodKvm());
  ASSERT_OK(d);
  EXPECT_EQ(d->accelerator, Accelerator::kTcg);
  EXPECT_FALSE(d->degraded);
  EXPECT_TRUE(d->kvm_usable);
}

TEST(AccelProbeTest, UntimedButOtherwiseGoodKvmIsUsable) {
  KvmFacts f = GoodKvm();
  f.timing.reset();
  EXPECT_TRUE(JudgeKvm(f).kvm_usable);
}

TEST(AccelProbeTest, GatherReadsInjectedHostFiles) {
  auto dir = TempDir::Create("accel");
  ASSERT_OK(dir);
  ASSERT_OK(MkdirAll(dir->Join("module/kvm_pvm")));
  ASSERT_OK(WriteFile(dir->Join("cpuinfo"), "processor\t: 0\nflags\t\t: fpu vme hypervisor svm lm\n"));
  // A regular file stands in for /dev/kvm: it opens but answers no ioctl.
  ASSERT_OK(WriteFile(dir->Join("kvm"), ""));
  KvmProbePaths paths{dir->Join("kvm"), dir->Join("cpuinfo"), dir->Join("module")};
  KvmFacts f = GatherKvmFacts(paths, /*time_guest=*/true);
  EXPECT_TRUE(f.dev_kvm_exists);
  EXPECT_EQ(f.open_errno, 0);
  EXPECT_EQ(f.api_version, -1);
  EXPECT_TRUE(f.cpu_has_vmx_or_svm);
  EXPECT_TRUE(f.pvm_module);
  EXPECT_FALSE(f.timing.has_value());  // never timed when static facts fail

  ASSERT_OK(WriteFile(dir->Join("cpuinfo"), "flags\t: fpu vmxx hypervisor\n"));
  paths.dev_kvm = dir->Join("absent");
  f = GatherKvmFacts(paths);
  EXPECT_FALSE(f.cpu_has_vmx_or_svm);
  EXPECT_FALSE(f.dev_kvm_exists);
}

// The timing guest itself needs real KVM (none on the build hosts); its
// child-process harness and error reporting are checked here.
TEST(KvmTimingTest, ReportsTheFailedStepFromTheChild) {
  auto dir = TempDir::Create("kvmtiming");
  ASSERT_OK(dir);
  ASSERT_OK(WriteFile(dir->Join("not-kvm"), ""));
  KvmTiming t = TimeKvmGuest(dir->Join("not-kvm"), 1000, std::chrono::milliseconds(5000));
  EXPECT_FALSE(t.ran);
  EXPECT_EQ(t.error, "KVM_CREATE_VM " + dir->Join("not-kvm") + ": Inappropriate ioctl for device");
  t = TimeKvmGuest(dir->Join("absent"), 1000, std::chrono::milliseconds(5000));
  EXPECT_FALSE(t.ran);
  EXPECT_EQ(t.error, "open " + dir->Join("absent") + ": No such file or directory");
}

TEST(KvmTimingTest, RealKvmWhenPresent) {
  KvmFacts f = GatherKvmFacts();
  if (!f.timing) GTEST_SKIP() << "no KVM worth timing here: " << JudgeKvm(f).reason;
  EXPECT_TRUE(f.timing->ran) << f.timing->error;
  std::printf("%s\n", JudgeKvm(f).reason.c_str());
}

}  // namespace
}  // namespace capsule::hypervisor
