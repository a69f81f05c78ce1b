#include "agent/server/rpc_util.h"

#include "runtime/common/logging.h"

namespace capsule::agent::server {
namespace {

const log::Logger kRpcUtilLog("rpc");

bool IsCallerError(Code code) {
  switch (code) {
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kAlreadyExists:
    case Code::kFailedPrecondition:
    case Code::kOutOfRange:
    case Code::kUnimplemented:
    case Code::kCancelled:
      return true;
    default:
      return false;
  }
}

}  // namespace

grpc::Status Reply(std::string_view rpc, const Status& status) {
  if (status.ok()) {
    kRpcUtilLog.Debug("{}: ok", rpc);
  } else if (IsCallerError(status.code())) {
    kRpcUtilLog.Warn("{}: {}", rpc, status.ToString());
  } else {
    kRpcUtilLog.Error("{}: {}", rpc, status.ToString());
  }
  return ToGrpcStatus(status);
}

}  // namespace capsule::agent::server
