// See server_protocol.h. Oversized frames answer RESOURCE_EXHAUSTED on their
// stream id and leave the connection usable, as ttrpc's channel.recv does.
#include "runtime/ttrpc/server_protocol.h"

#include <fmt/format.h>

namespace capsule::ttrpc {

FrameAction RequestStream::Classify(DecodedFrame frame) {
  const FrameHeader& h = frame.header;
  if (frame.oversized) {
    return ImmediateReply{
        h.stream_id, ResourceExhausted(fmt::format(
                         "ttrpc: message length {} exceeds maximum message size of {}", h.length,
                         kMaxPayloadBytes))};
  }
  if (h.type != static_cast<uint8_t>(FrameType::kRequest)) {
    return CloseConnection{
        fmt::format("frame of type {} on stream {} is not a request", h.type, h.stream_id)};
  }
  if (h.stream_id % 2 != 1) {
    return ImmediateReply{
        h.stream_id,
        InvalidArgument(fmt::format("ttrpc: stream id {} is even; client streams are odd",
                                    h.stream_id))};
  }
  if (h.stream_id <= last_stream_id_) {
    return ImmediateReply{
        h.stream_id, InvalidArgument(fmt::format(
                         "ttrpc: stream id {} reused or not increasing (last was {})",
                         h.stream_id, last_stream_id_))};
  }
  last_stream_id_ = h.stream_id;
  InboundCall call;
  call.stream_id = h.stream_id;
  call.received_at = std::chrono::steady_clock::now();
  if (!call.request.ParseFromString(frame.payload)) {
    return CloseConnection{fmt::format("unparsable ttrpc Request on stream {} ({} bytes)",
                                       h.stream_id, frame.payload.size())};
  }
  return call;
}

}  // namespace capsule::ttrpc
