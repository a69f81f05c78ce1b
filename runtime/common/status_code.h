// A status code a peer sent as a number. capsule::Code is google.rpc.Code,
// so gRPC, ttrpc's google.rpc.Status and the container child's sync
// messages all carry the same numbers; each peer's number is checked here,
// and one outside the enum (a hostile or newer peer) is UNKNOWN.
#pragma once

#include <cstdint>

#include "runtime/common/status.h"

namespace capsule {

inline Code CodeFromNumber(int64_t number) {
  if (number < 0 || number > static_cast<int64_t>(Code::kUnauthenticated)) return Code::kUnknown;
  return static_cast<Code>(number);
}

}  // namespace capsule
