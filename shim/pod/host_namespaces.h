// Which host namespaces a CRI pod sandbox asks to share. CRI leaves a
// namespace out of the sandbox's linux.namespaces when the pod shares the
// node's (hostNetwork, hostPID, hostIPC: true). A pod in a VM cannot share
// any of them — the guest has its own kernel — so such a pod is refused at
// RunPodSandbox with an error that says why and what to use instead, rather
// than run with a silently different meaning.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/common/status.h"

namespace capsule::shim::pod {

// The pod spec fields ("hostNetwork", "hostPID", "hostIPC") whose namespace
// the sandbox spec leaves out, in that order.
std::vector<std::string> HostNamespacesAskedFor(const nlohmann::json& sandbox_spec);

// OK when the pod shares none; else INVALID_ARGUMENT naming the sandbox,
// each field, and the remedy (a runc RuntimeClass). A network namespace
// path that is the host's own counts as hostNetwork (RefuseHostNetns).
Status RefuseHostNamespaces(const nlohmann::json& sandbox_spec, std::string_view sandbox_id);

// INVALID_ARGUMENT when `netns_path` is the network namespace of the host
// (PID 1's, or this shim's): the pod's NIC would redirect the host's
// interfaces into the VM. Checked before any tap or redirect is made.
Status RefuseHostNetns(const std::string& netns_path);

}  // namespace capsule::shim::pod
