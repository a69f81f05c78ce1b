// What CreateSandbox (or SetupSandbox's sandbox) asks of the guest's pod, and
// its checks. Nothing here touches the system, so every bad field is
// reported before anything is mounted; field names in errors follow the proto.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/storage/storage.h"
#include "runtime/common/status.h"

namespace capsule::agent::pod {

struct PodSpec {
  std::string id;
  std::string hostname;                        // empty: keep the boot hostname
  std::vector<std::string> dns;                // resolv.conf lines, or bare server addresses
  std::vector<storage::StorageSpec> storages;  // mounted in order, unmounted in reverse
  bool sandbox_pidns = false;
  std::vector<std::string> kernel_modules;  // loaded before the storages are mounted
};

inline constexpr size_t kMaxIdBytes = 128;
// A sandbox, container or exec id, which the guest uses in paths and cgroup
// names: 1..128 bytes of [A-Za-z0-9_.-], not "." or "..". The error names
// `field`.
Status CheckId(std::string_view field, const std::string& id);

Status ValidatePodSpec(const PodSpec& spec);
// resolv.conf text from the spec's dns entries.
Result<std::string> ResolvConfFromDns(const std::vector<std::string>& dns);

}  // namespace capsule::agent::pod
