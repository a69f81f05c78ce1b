// The server's reading of one decoded frame, kept free of sockets and threads
// so tests and the fuzzer can drive it: a call to dispatch, a status to send
// straight back (oversized frame, bad stream id), or a reason to drop the
// connection (not a request, unparsable Request).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <variant>

#include "runtime/common/status.h"
#include "runtime/ttrpc/frame.h"
#include "ttrpc/request.pb.h"

namespace capsule::ttrpc {

struct InboundCall {
  uint32_t stream_id = 0;
  ::ttrpc::Request request;
  std::chrono::steady_clock::time_point received_at;
};

struct ImmediateReply {
  uint32_t stream_id = 0;
  Status status;
};

struct CloseConnection {
  std::string reason;
};

using FrameAction = std::variant<InboundCall, ImmediateReply, CloseConnection>;

// Per-connection request stream state: client stream ids must be odd and
// strictly increasing (ttrpc server.go answers INVALID_ARGUMENT otherwise).
class RequestStream {
 public:
  FrameAction Classify(DecodedFrame frame);

 private:
  uint32_t last_stream_id_ = 0;
};

}  // namespace capsule::ttrpc
