// Status conversion for ttrpc responses; see status_proto.h.
#include "runtime/ttrpc/status_proto.h"

#include "ttrpc/request.pb.h"

namespace capsule::ttrpc {

// Highest code in google/rpc/code.proto (UNAUTHENTICATED).
constexpr int kMaxGrpcCode = static_cast<int>(Code::kUnauthenticated);

void StatusToProto(const Status& status, google::rpc::Status* out) {
  out->set_code(static_cast<int32_t>(status.code()));
  out->set_message(status.message());
}

Status StatusFromProto(const google::rpc::Status& proto) {
  const int code = proto.code();
  if (code == 0) return Status::Ok();
  if (code < 0 || code > kMaxGrpcCode) {
    return Status(Code::kUnknown, "ttrpc: status code " + std::to_string(code) + ": " + proto.message());
  }
  return Status(static_cast<Code>(code), proto.message());
}

}  // namespace capsule::ttrpc
