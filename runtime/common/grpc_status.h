// capsule::Status <-> grpc::Status, for every gRPC server and client (the
// agent, the pool daemon, their clients): the codes are the same numbers
// (status_code.h). Header-only, so that runtime/common itself does not
// link gRPC.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "runtime/common/status.h"
#include "runtime/common/status_code.h"

namespace capsule {

inline grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), status.message());
}

// The peer's code, with `message` (the caller words it: the peer's own
// text may need bounding or context).
inline Status FromGrpcStatus(const grpc::Status& status, std::string message) {
  if (status.ok()) return Status::Ok();
  return Status(CodeFromNumber(static_cast<int64_t>(status.error_code())), std::move(message));
}

}  // namespace capsule
