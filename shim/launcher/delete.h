// `delete`: containerd runs `<shim> ... -bundle PATH delete` when a shim is
// gone (crashed, killed, or a failed start) to clean up after it, and reads
// a serialized containerd.task.v2.DeleteResponse from stdout.
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "shim/launcher/flags.h"
#include "shim/launcher/hooks.h"

namespace capsule::shim::launcher {

// Exit status reported for a task whose shim vanished: 128 + SIGKILL, as the
// runc shim reports (runtime/v2/runc/manager, Stop).
inline constexpr uint32_t kDeadShimExitStatus = 137;

struct DeleteRequest {
  ShimFlags flags;
  std::string bundle;  // absolute
  CleanupFn cleanup;   // VM teardown; may be empty
};

// Runs the clean-up hook, removes the launcher's leftovers (the group socket
// when nobody serves it any more, the bundle's address file) and returns the
// serialized DeleteResponse{pid, exit_status 137, exited_at now}. A live
// daemon's socket is kept: it still serves the pod's other containers.
Result<std::string> DeleteShim(const DeleteRequest& request);

}  // namespace capsule::shim::launcher
