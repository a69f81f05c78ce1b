// The status an exec or attach session ends with under the v4 channel
// protocol: a metav1.Status as JSON on kErrorChannel. Success, or Failure
// with the exit code in details.causes[reason == "ExitCode"].message
// (k8s.io/kubelet cri/streaming/remotecommand, NonZeroExitCode).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::testing::streaming {

struct ExecStatus {
  bool success = false;
  // 0 on success; on failure the ExitCode cause's value, or nullopt when
  // the failure was not the command's exit (InternalError: it did not run).
  std::optional<int> exit_code;
  std::string reason;   // metav1.Status.reason ("NonZeroExitCode", "InternalError")
  std::string message;  // metav1.Status.message
};

// Parses the error channel's payload. INVALID_ARGUMENT, quoting the text,
// when it is empty, not JSON, not a Success/Failure status, or carries an
// ExitCode cause that is not a number.
Result<ExecStatus> ParseExecStatus(std::string_view json);

}  // namespace capsule::testing::streaming
