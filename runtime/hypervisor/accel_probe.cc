// Accelerator choice: gather host facts, judge them in order of how clearly
// each explains a failure, and turn the verdict into a decision for the
// configured accelerator (auto | kvm | tcg).
#include "runtime/hypervisor/accel_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"
#include "runtime/hypervisor/kvm_timing.h"

namespace capsule::hypervisor {
namespace {

const log::Logger kAccelProbeLog("hypervisor");

AccelDecision Unusable(std::string why) { return AccelDecision{Accelerator::kTcg, false, "KVM unusable: " + std::move(why), false}; }

bool CpuinfoHasVirtFlags(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 1));
    std::string w;
    while (words >> w) {
      if (w == "vmx" || w == "svm") return true;
    }
    return false;  // the first CPU speaks for all
  }
  return false;
}

}  // namespace

AccelDecision JudgeKvm(const KvmFacts& f) {
  if (!f.dev_kvm_exists) return Unusable(f.pvm_module ? "/dev/kvm absent (kvm_pvm module loaded)" : "/dev/kvm absent");
  if (f.open_errno != 0) return Unusable(fmt::format("cannot open /dev/kvm: {}", std::strerror(f.open_errno)));
  if (f.api_version != kKvmApiVersion)
    return Unusable(fmt::format("KVM_GET_API_VERSION returned {}, expected {}", f.api_version, kKvmApiVersion));
  if (f.pvm_module)
    return AccelDecision{Accelerator::kTcg, false,
                         "KVM is the PVM flavour (/sys/module/kvm_pvm): guest kernels run emulated one "
                         "instruction at a time and a stock kernel does not boot at usable speed",
                         false};
  if (!f.cpu_has_vmx_or_svm) return Unusable("no vmx/svm flag in /proc/cpuinfo (no hardware virtualization)");
  if (!f.timing) return AccelDecision{Accelerator::kKvm, true, "KVM ok: vmx/svm present (guest not timed)", false};
  const KvmTiming& t = *f.timing;
  if (!t.ran) return Unusable("test guest failed: " + t.error);
  double ms = static_cast<double>(t.elapsed_ns) / 1e6;
  if (t.elapsed_ns > static_cast<uint64_t>(std::chrono::nanoseconds(kKvmProbeMaxLoopTime).count()))
    return Unusable(fmt::format("too slow: {}-iteration guest loop took {:.1f} ms (limit {} ms)", t.iterations, ms,
                                kKvmProbeMaxLoopTime.count()));
  return AccelDecision{Accelerator::kKvm, true, fmt::format("KVM ok: {}-iteration guest loop took {:.2f} ms", t.iterations, ms), false};
}

Result<AccelDecision> DecideAccelerator(config::Accelerator requested, const KvmFacts& facts) {
  AccelDecision kvm = JudgeKvm(facts);
  switch (requested) {
    case config::Accelerator::kTcg:
      return AccelDecision{Accelerator::kTcg, kvm.kvm_usable, "accelerator: tcg configured (" + kvm.reason + ")", false};
    case config::Accelerator::kKvm:
      if (!kvm.kvm_usable) return FailedPrecondition("accelerator: kvm configured but " + kvm.reason);
      return kvm;
    case config::Accelerator::kAuto:
      if (kvm.kvm_usable) return kvm;
      kvm.degraded = true;
      kvm.reason += "; using TCG (software emulation, roughly 10-50x slower)";
      return kvm;
  }
  return Internal("unknown accelerator setting");
}

KvmFacts GatherKvmFacts(const KvmProbePaths& paths, bool time_guest) {
  KvmFacts f;
  f.pvm_module = PathExists(paths.sys_module + "/kvm_pvm");
  auto cpuinfo = ReadFile(paths.cpuinfo);
  f.cpu_has_vmx_or_svm = cpuinfo.ok() && CpuinfoHasVirtFlags(*cpuinfo);
  f.dev_kvm_exists = PathExists(paths.dev_kvm);
  if (!f.dev_kvm_exists) return f;
  UniqueFd kvm(::open(paths.dev_kvm.c_str(), O_RDWR | O_CLOEXEC));
  if (!kvm) {
    f.open_errno = errno;
    return f;
  }
  f.api_version = ::ioctl(kvm.get(), KVM_GET_API_VERSION, 0);
  if (time_guest && JudgeKvm(f).kvm_usable) f.timing = TimeKvmGuest(paths.dev_kvm, kKvmProbeIterations, kKvmProbeDeadline);
  return f;
}

Result<AccelDecision> ProbeAccelerator(config::Accelerator requested) {
  KvmFacts facts = GatherKvmFacts();
  auto d = DecideAccelerator(requested, facts);
  if (!d.ok()) {
    kAccelProbeLog.Error("{}", d.status().message());
  } else if (d->degraded) {
    kAccelProbeLog.Warn("!!! {} !!!", d->reason);
  } else {
    kAccelProbeLog.Info("accelerator {}: {}", AcceleratorName(d->accelerator), d->reason);
  }
  return d;
}

}  // namespace capsule::hypervisor
