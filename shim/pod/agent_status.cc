// See agent_status.h.
#include "shim/pod/agent_status.h"

namespace capsule::shim::pod {

namespace {

Status Named(Status st, const std::string& reason) {
  return reason.empty() ? st : std::move(st).WithReason(reason);
}

Status Convert(const Status& st, const std::string& msg) {
  switch (st.code()) {
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
      return Status(st.code(), msg);
    // The connection to the guest broke or was closed: the VM is gone or
    // going, which containerd should see as unavailable, not cancelled.
    case Code::kCancelled:
    case Code::kUnavailable:
      return Unavailable(msg);
    default:
      return Internal(msg);
  }
}

}  // namespace

Status FromAgent(const Status& st, std::string_view what) {
  if (st.ok()) return st;
  // The real client's messages start with "agent <Rpc>"; a fake's may not.
  const bool named = st.message().rfind("agent ", 0) == 0;
  const std::string msg = std::string(what) + (named ? ": " : ": agent: ") + st.message();
  // The agent's reason (why, by name) is kept whatever the code becomes.
  return Named(Convert(st, msg), st.reason());
}

}  // namespace capsule::shim::pod
