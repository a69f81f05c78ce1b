// Which VM an operator means by a pod argument (capsule-runtime exec POD):
// the pod's sandbox id or a unique prefix of it (at least 4 characters),
// its CRI "namespace/name" as kubectl shows it, or the VM's id.
#pragma once

#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/vm/vm_listing.h"

namespace capsule::vm {

inline constexpr size_t kMinPodPrefix = 4;

// Only VMs that serve a pod match. NOT_FOUND names the argument;
// INVALID_ARGUMENT when it matches more than one pod (names them).
Result<VmListing> FindPod(const std::vector<VmListing>& vms, std::string_view query);

}  // namespace capsule::vm
