// Which accelerator VMs get: KVM only when it can really run a stock guest
// kernel, else TCG. Facts are gathered from the host (GatherKvmFacts) and
// judged by a pure function (DecideAccelerator) that tests feed directly.
// /dev/kvm existing is not enough: "PVM" KVM (a KVM for hosts that are
// themselves VMs, /sys/module/kvm_pvm) emulates guest ring 0 instruction by
// instruction and never finishes booting a Debian kernel (HOST-NOTES.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/common/status.h"
#include "runtime/config/config.h"
#include "runtime/hypervisor/vm_spec.h"

namespace capsule::hypervisor {

// KVM_API_VERSION from linux/kvm.h: the only stable API there has ever been.
inline constexpr int kKvmApiVersion = 12;
// The timing guest: a real-mode countdown loop of this many iterations.
// VT-x/AMD-V runs it in well under a millisecond; PVM took ~2 us per
// iteration (~400 ms). The limit sits far from both.
inline constexpr uint32_t kKvmProbeIterations = 200000;
inline constexpr std::chrono::milliseconds kKvmProbeMaxLoopTime{50};
// A probe guest that has not halted by then counts as failed.
inline constexpr std::chrono::milliseconds kKvmProbeDeadline{3000};

struct KvmTiming {
  bool ran = false;       // the guest reached HLT
  std::string error;      // why not, when !ran
  uint32_t iterations = 0;
  uint64_t elapsed_ns = 0;  // time inside KVM_RUN
};

struct KvmFacts {
  bool dev_kvm_exists = false;
  int open_errno = 0;       // errno of open(/dev/kvm); 0 = opened
  int api_version = -1;     // KVM_GET_API_VERSION, -1 if not asked
  bool cpu_has_vmx_or_svm = false;  // /proc/cpuinfo flags
  bool pvm_module = false;  // /sys/module/kvm_pvm present
  std::optional<KvmTiming> timing;  // only gathered when the rest looks fine
};

struct AccelDecision {
  Accelerator accelerator = Accelerator::kTcg;
  bool kvm_usable = false;
  // Human sentence: "KVM unusable: /dev/kvm absent", "KVM ok: 200000-iteration
  // loop took 0.3 ms", ...
  std::string reason;
  // TCG chosen because KVM failed under "auto": say it loudly.
  bool degraded = false;
};

// Where the facts come from; tests point these into a temp dir.
struct KvmProbePaths {
  std::string dev_kvm = "/dev/kvm";
  std::string cpuinfo = "/proc/cpuinfo";
  std::string sys_module = "/sys/module";
};

// Whether KVM can run a stock guest, and why (or why not).
AccelDecision JudgeKvm(const KvmFacts& facts);

// requested kvm + unusable KVM -> FAILED_PRECONDITION naming the reason;
// auto -> KVM if usable, else TCG with degraded = true; tcg -> TCG.
Result<AccelDecision> DecideAccelerator(config::Accelerator requested, const KvmFacts& facts);

// Reads the host. Runs the timing guest only when the static facts pass
// and `time_guest` is set (it costs a fork and a few milliseconds).
KvmFacts GatherKvmFacts(const KvmProbePaths& paths = {}, bool time_guest = true);

// GatherKvmFacts + DecideAccelerator, logging the outcome (a warning when TCG
// replaces KVM under "auto").
Result<AccelDecision> ProbeAccelerator(config::Accelerator requested);

}  // namespace capsule::hypervisor
