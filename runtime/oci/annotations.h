// Annotations containerd's CRI plugin writes into every spec (pkg/cri/
// annotations in containerd 1.6), shared by the shim (one shim per pod,
// VM sizing) and the agent (which container anchors the pod's namespaces).
#pragma once

#include <string_view>

namespace capsule::oci {

inline constexpr std::string_view kCriContainerType = "io.kubernetes.cri.container-type";
inline constexpr std::string_view kCriContainerTypeSandbox = "sandbox";
inline constexpr std::string_view kCriContainerTypeContainer = "container";
inline constexpr std::string_view kCriSandboxId = "io.kubernetes.cri.sandbox-id";

}  // namespace capsule::oci
