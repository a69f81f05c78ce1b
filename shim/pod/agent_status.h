// The one place where the agent's answers become the Task service's: the
// agent speaks gRPC codes, containerd reads ttrpc codes with containerd's
// errdefs meanings (NotFound for "already exited", FailedPrecondition for a
// wrong state, Unavailable when the VM or its agent is gone).
#pragma once

#include <string_view>

#include "runtime/common/status.h"

namespace capsule::shim::pod {

// OK stays OK. `what` names the call and object ("start container c1").
Status FromAgent(const Status& agent_status, std::string_view what);

}  // namespace capsule::shim::pod
