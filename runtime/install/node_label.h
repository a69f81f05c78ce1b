// The node label the RuntimeClass (deploy/kubernetes/runtimeclass.yaml)
// schedules capsule pods by: the installer sets capsule.io/runtime=true on
// its node once the runtime is in place, and removes it before taking the
// runtime away. Both are one JSON merge patch of the Node (kube_api.h).
#pragma once

#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/install/kube_api.h"

namespace capsule::install {

inline constexpr char kRuntimeLabel[] = "capsule.io/runtime";

// A Node's name is a DNS-1123 subdomain: at most 253 characters of
// [a-z0-9.-], each dot-separated part starting and ending alphanumeric.
Status ValidateNodeName(std::string_view name);

// The merge patches, as sent.
std::string LabelPatch();    // {"metadata":{"labels":{"capsule.io/runtime":"true"}}}
std::string UnlabelPatch();  // {"metadata":{"labels":{"capsule.io/runtime":null}}}

// Sets capsule.io/runtime=true on `node`. The name is checked before any
// request; errors name the node.
Status LabelNode(const KubeApiOptions& api, const std::string& node);
// Removes capsule.io/runtime from `node` (a no-op where it is absent).
Status UnlabelNode(const KubeApiOptions& api, const std::string& node);

}  // namespace capsule::install
