// capsule::Status <-> grpc::Status, for every gRPC server and client (the
// agent, the pool daemon, their clients): the codes are the same numbers
// (status_code.h), and a reason travels as a google.rpc.ErrorInfo in the
// google.rpc.Status that gRPC sends as grpc-status-details-bin, as Google's
// APIs do. Header-only, so that runtime/common itself does not link gRPC
// or protobuf: its users link capsule_proto.
#pragma once

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "runtime/common/status.h"
#include "runtime/common/status_code.h"

namespace capsule {

inline constexpr std::string_view kReasonDomain = "capsule.io";
// More than a reason and its wrapping ever take: a peer's larger details are
// not parsed.
inline constexpr size_t kMaxStatusDetailsBytes = 4096;

inline grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  if (status.reason().empty()) return grpc::Status(code, status.message());
  google::rpc::ErrorInfo info;
  info.set_reason(status.reason());
  info.set_domain(std::string(kReasonDomain));
  google::rpc::Status details;
  details.set_code(static_cast<int32_t>(status.code()));
  details.set_message(status.message());
  details.add_details()->PackFrom(info);
  return grpc::Status(code, status.message(), details.SerializeAsString());
}

// The reason a peer named in its status details: "" when it named none, or
// sent details that do not parse, are too large, name another domain or a
// reason that is not IsReasonName (a hostile peer's bytes stop here).
inline std::string ReasonFromGrpcStatus(const grpc::Status& status) {
  const std::string& bytes = status.error_details();
  if (bytes.empty() || bytes.size() > kMaxStatusDetailsBytes) return "";
  google::rpc::Status details;
  if (!details.ParseFromString(bytes)) return "";
  for (const auto& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (!any.Is<google::rpc::ErrorInfo>() || !any.UnpackTo(&info)) continue;
    if (info.domain() == kReasonDomain && IsReasonName(info.reason())) return info.reason();
  }
  return "";
}

// The peer's code and reason, with `message` (the caller words it: the
// peer's own text may need bounding or context).
inline Status FromGrpcStatus(const grpc::Status& status, std::string message) {
  if (status.ok()) return Status::Ok();
  Status st(CodeFromNumber(static_cast<int64_t>(status.error_code())), std::move(message));
  const std::string reason = ReasonFromGrpcStatus(status);
  return reason.empty() ? st : std::move(st).WithReason(reason);
}

}  // namespace capsule
