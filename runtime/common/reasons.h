// Every reason a Capsule Status names (Status::reason, google.rpc.ErrorInfo
// `reason` on the gRPC wire): why a call failed, by a stable name that
// callers and tests match instead of the message's prose. One list, so that
// one name has one meaning on both sides of the VM: the agent sends some of
// these and the host matches them. A reason refines a code; it never
// replaces it (containerd and kubelet see only the code and the message).
#pragma once

#include <array>
#include <string_view>

namespace capsule::reason {

// The object is in a state that refuses the call: a task deleted while it
// runs, an exec in a container not yet started, a start while another is
// in progress, a pause of a stopped sandbox (FAILED_PRECONDITION).
inline constexpr std::string_view kWrongState = "WRONG_STATE";
// The pod asks to share a host namespace (hostNetwork, hostPID, hostIPC),
// which a pod VM refuses by design (INVALID_ARGUMENT).
inline constexpr std::string_view kHostNamespaceRefused = "HOST_NAMESPACE_REFUSED";
// A process's argv[0] names no executable file on its PATH (NOT_FOUND).
inline constexpr std::string_view kExecutableNotFound = "EXECUTABLE_NOT_FOUND";
// No container of that id (NOT_FOUND).
inline constexpr std::string_view kContainerNotFound = "CONTAINER_NOT_FOUND";
// The agent has no sandbox yet: CreateSandbox (or SetupSandbox) comes
// first (FAILED_PRECONDITION).
inline constexpr std::string_view kNoSandbox = "NO_SANDBOX";
// A pod's container arrived before the pod's sandbox container, or a second
// sandbox container arrived (FAILED_PRECONDITION).
inline constexpr std::string_view kSandboxContainerOrder = "SANDBOX_CONTAINER_ORDER";
// The agent refused the VM token the host proved, or the peer proved a
// wrong one (PERMISSION_DENIED).
inline constexpr std::string_view kAgentTokenRefused = "AGENT_TOKEN_REFUSED";
// A path is not the kind of file it must be: a symlink, FIFO, socket,
// device or directory where only a regular file (or a real directory)
// belongs. Refused, never followed or opened (INVALID_ARGUMENT or
// FAILED_PRECONDITION).
inline constexpr std::string_view kWrongFileType = "WRONG_FILE_TYPE";
// The VMM process exited during its start-up or before its guest's agent
// answered (UNAVAILABLE).
inline constexpr std::string_view kVmmExited = "VMM_EXITED";

inline constexpr std::array kAll = {
    kWrongState,         kHostNamespaceRefused, kExecutableNotFound, kContainerNotFound,
    kSandboxContainerOrder, kNoSandbox, kAgentTokenRefused, kWrongFileType, kVmmExited,
};

}  // namespace capsule::reason
