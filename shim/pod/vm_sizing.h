// How big a pod's VM is. containerd 1.6.20's CRI annotates the sandbox with
// the pod's summed container limits when the kubelet sends them
// (io.kubernetes.cri.sandbox-cpu-period/-cpu-quota/-cpu-shares and
// -sandbox-memory, in bytes; checked with `strings /usr/bin/containerd`).
// Like Kata's static sizing, the workload's limits are added to the
// configured base (the guest kernel and agent need room of their own),
// then bounded by guest.max_vcpus / guest.max_memory_mib. A container run
// by plain `ctr run` (no CRI annotations) is sized from its own
// linux.resources the same way.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/common/status.h"
#include "runtime/config/config.h"

namespace capsule::shim::pod {

inline constexpr const char* kAnnotationCpuPeriod = "io.kubernetes.cri.sandbox-cpu-period";
inline constexpr const char* kAnnotationCpuQuota = "io.kubernetes.cri.sandbox-cpu-quota";
inline constexpr const char* kAnnotationCpuShares = "io.kubernetes.cri.sandbox-cpu-shares";
inline constexpr const char* kAnnotationMemory = "io.kubernetes.cri.sandbox-memory";

// What the workload asks for; unset or <= 0 means no limit.
struct WorkloadLimits {
  std::optional<int64_t> cpu_quota_us;
  std::optional<int64_t> cpu_period_us;
  std::optional<int64_t> memory_bytes;
};

struct VmSize {
  uint32_t vcpus = 0;
  uint32_t memory_mib = 0;
  std::vector<std::string> notes;  // how it was derived, clamps included
};

// From the CRI sandbox annotations; an annotation that is not an integer is
// INVALID_ARGUMENT naming it.
Result<WorkloadLimits> LimitsFromAnnotations(const std::map<std::string, std::string>& annotations);
// From a spec's linux.resources (cpu.quota/period, memory.limit).
WorkloadLimits LimitsFromSpec(const nlohmann::json& spec);

VmSize SizeVm(const WorkloadLimits& limits, const config::GuestConfig& guest);

}  // namespace capsule::shim::pod
