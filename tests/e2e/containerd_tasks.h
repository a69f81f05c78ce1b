// The one containerd Tasks API call the ctr e2e suites need that Debian's
// ctr 1.6.20 lacks: Tasks.Update (`ctr task update` came in a later ctr).
// A plain gRPC call to containerd's socket, so the request takes the same
// path as any client's: containerd's tasks service -> runtime v2 -> the
// shim's Task.Update.
#pragma once

#include <string>

#include "runtime/common/status.h"

namespace capsule::testing {

// containerd.services.tasks.v1.Tasks/Update of `container_id` in namespace
// `ns` with `resources_json` (an OCI LinuxResources as JSON, the form
// containerd's Go client marshals it in).
Status UpdateTaskResources(const std::string& grpc_socket, const std::string& ns, const std::string& container_id,
                           const std::string& resources_json);

}  // namespace capsule::testing
