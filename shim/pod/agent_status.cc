// See agent_status.h.
#include "shim/pod/agent_status.h"

namespace capsule::shim::pod {
namespace {

// The code containerd is given for an agent's code.
Code ForContainerd(Code code) {
  switch (code) {
    // Meaningful to containerd as they are.
    case Code::kNotFound:
    case Code::kAlreadyExists:
    case Code::kInvalidArgument:
    case Code::kFailedPrecondition:
    case Code::kUnimplemented:
    case Code::kResourceExhausted:
    case Code::kPermissionDenied:
    case Code::kOutOfRange:
    case Code::kDeadlineExceeded:
    case Code::kAborted:
      return code;
    // The connection to the guest broke or was closed: the VM is gone or
    // going, which containerd should see as unavailable, not cancelled.
    case Code::kCancelled:
    case Code::kUnavailable:
      return Code::kUnavailable;
    default:
      return Code::kInternal;
  }
}

}  // namespace

Status FromAgent(const Status& st, std::string_view what) {
  if (st.ok()) return st;
  // The real client's messages start with "agent <Rpc>"; a fake's may not.
  const bool named = st.message().rfind("agent ", 0) == 0;
  Status out(ForContainerd(st.code()), std::string(what) + (named ? ": " : ": agent: ") + st.message());
  // The agent's reason (why, by name) is kept whatever the code becomes.
  return st.reason().empty() ? out : std::move(out).WithReason(st.reason());
}

}  // namespace capsule::shim::pod
