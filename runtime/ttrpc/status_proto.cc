// Status conversion for ttrpc responses; see status_proto.h.
#include "runtime/ttrpc/status_proto.h"

#include "runtime/common/status_code.h"
#include "ttrpc/request.pb.h"

namespace capsule::ttrpc {

void StatusToProto(const Status& status, google::rpc::Status* out) {
  out->set_code(static_cast<int32_t>(status.code()));
  out->set_message(status.message());
}

Status StatusFromProto(const google::rpc::Status& proto) {
  const int code = proto.code();
  if (code == 0) return Status::Ok();
  const Code known = CodeFromNumber(code);
  if (known == Code::kUnknown && code != static_cast<int>(Code::kUnknown))
    return Status(Code::kUnknown, "ttrpc: status code " + std::to_string(code) + ": " + proto.message());
  return Status(known, proto.message());
}

}  // namespace capsule::ttrpc
