// capsule::Status <-> google.rpc.Status (Response.status). Codes map 1:1
// because both follow gRPC's numbering; this is the one place that maps them.
#pragma once

#include "runtime/common/status.h"

namespace google::rpc {
class Status;
}

namespace capsule::ttrpc {

void StatusToProto(const Status& status, google::rpc::Status* out);
// A code outside gRPC's 0..16 becomes UNKNOWN, the raw code kept in the message.
Status StatusFromProto(const google::rpc::Status& proto);

}  // namespace capsule::ttrpc
