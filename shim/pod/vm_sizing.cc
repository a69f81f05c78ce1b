// See vm_sizing.h.
#include "shim/pod/vm_sizing.h"

#include <charconv>

#include <fmt/format.h>

namespace capsule::shim::pod {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

Result<std::optional<int64_t>> IntAnnotation(const std::map<std::string, std::string>& a, const char* key) {
  auto it = a.find(key);
  if (it == a.end() || it->second.empty()) return std::optional<int64_t>();
  int64_t v = 0;
  const char* end = it->second.data() + it->second.size();
  auto [ptr, ec] = std::from_chars(it->second.data(), end, v);
  if (ec != std::errc() || ptr != end)
    return InvalidArgument(fmt::format("annotation {}='{}' is not an integer", key, it->second));
  return std::optional<int64_t>(v);
}

std::optional<int64_t> JsonInt(const nlohmann::json& j, std::initializer_list<const char*> path) {
  const nlohmann::json* cur = &j;
  for (const char* key : path) {
    if (!cur->is_object() || !cur->contains(key)) return std::nullopt;
    cur = &(*cur)[key];
  }
  if (!cur->is_number_integer()) return std::nullopt;
  return cur->get<int64_t>();
}

}  // namespace

Result<WorkloadLimits> LimitsFromAnnotations(const std::map<std::string, std::string>& annotations) {
  WorkloadLimits l;
  ASSIGN_OR_RETURN(l.cpu_quota_us, IntAnnotation(annotations, kAnnotationCpuQuota));
  ASSIGN_OR_RETURN(l.cpu_period_us, IntAnnotation(annotations, kAnnotationCpuPeriod));
  ASSIGN_OR_RETURN(l.memory_bytes, IntAnnotation(annotations, kAnnotationMemory));
  // cpu-shares is a weight, not a size: validated, not used.
  ASSIGN_OR_RETURN(auto shares, IntAnnotation(annotations, kAnnotationCpuShares));
  (void)shares;
  return l;
}

WorkloadLimits LimitsFromSpec(const nlohmann::json& spec) {
  WorkloadLimits l;
  l.cpu_quota_us = JsonInt(spec, {"linux", "resources", "cpu", "quota"});
  l.cpu_period_us = JsonInt(spec, {"linux", "resources", "cpu", "period"});
  l.memory_bytes = JsonInt(spec, {"linux", "resources", "memory", "limit"});
  return l;
}

VmSize SizeVm(const WorkloadLimits& limits, const config::GuestConfig& guest) {
  VmSize s;
  uint64_t vcpus = guest.default_vcpus;
  uint64_t mib = guest.default_memory_mib;
  if (limits.cpu_quota_us.value_or(0) > 0 && limits.cpu_period_us.value_or(0) > 0) {
    const int64_t q = *limits.cpu_quota_us, p = *limits.cpu_period_us;
    // Rounded up without q + p - 1, which overflows for a quota near
    // INT64_MAX (an annotation is whatever the pod's author wrote).
    const uint64_t extra = static_cast<uint64_t>(q / p + (q % p != 0 ? 1 : 0));
    vcpus += extra;
    s.notes.push_back(fmt::format("cpu quota {}us / period {}us adds {} vCPU(s)", q, p, extra));
  }
  if (limits.memory_bytes.value_or(0) > 0) {
    const uint64_t bytes = static_cast<uint64_t>(*limits.memory_bytes);
    const uint64_t extra = bytes / kMiB + (bytes % kMiB != 0 ? 1 : 0);
    mib += extra;
    s.notes.push_back(fmt::format("memory limit {} bytes adds {} MiB", *limits.memory_bytes, extra));
  }
  if (vcpus > guest.max_vcpus) {
    s.notes.push_back(fmt::format("{} vCPUs capped at guest.max_vcpus {}", vcpus, guest.max_vcpus));
    vcpus = guest.max_vcpus;
  }
  if (mib > guest.max_memory_mib) {
    s.notes.push_back(fmt::format("{} MiB capped at guest.max_memory_mib {}", mib, guest.max_memory_mib));
    mib = guest.max_memory_mib;
  }
  s.vcpus = static_cast<uint32_t>(vcpus);
  s.memory_mib = static_cast<uint32_t>(mib);
  return s;
}

}  // namespace capsule::shim::pod
