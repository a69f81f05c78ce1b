// libFuzzer target: the ttrpc frame decoder and the server's per-frame
// rules (RequestStream). Checks, beyond "no crash": the frames do not depend
// on how the input was split, and each frame re-encodes to its input bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/ttrpc/frame.h"
#include "runtime/ttrpc/server_protocol.h"

namespace {

using capsule::ttrpc::DecodedFrame;
using capsule::ttrpc::FrameDecoder;

std::vector<DecodedFrame> DecodeChunked(std::string_view in, uint8_t seed) {
  FrameDecoder d;
  std::vector<DecodedFrame> out;
  size_t pos = 0;
  uint32_t state = seed | 1u;
  while (pos < in.size()) {
    state = state * 1103515245u + 12345u;  // cheap LCG for chunk sizes
    size_t n = 1 + (state >> 16) % 37;
    n = std::min(n, in.size() - pos);
    d.Feed(in.substr(pos, n));
    pos += n;
    while (auto f = d.Next()) out.push_back(std::move(*f));
  }
  return out;
}

bool Same(const DecodedFrame& a, const DecodedFrame& b) {
  return a.oversized == b.oversized && a.payload == b.payload && a.header.length == b.header.length &&
         a.header.stream_id == b.header.stream_id && a.header.type == b.header.type &&
         a.header.flags == b.header.flags;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t seed = data[0];
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);

  FrameDecoder whole;
  whole.Feed(in);
  std::vector<DecodedFrame> frames;
  while (auto f = whole.Next()) frames.push_back(std::move(*f));

  std::vector<DecodedFrame> chunked = DecodeChunked(in, seed);
  if (chunked.size() != frames.size()) __builtin_trap();
  size_t offset = 0;
  capsule::ttrpc::RequestStream stream;
  for (size_t i = 0; i < frames.size(); ++i) {
    const DecodedFrame& f = frames[i];
    if (!Same(f, chunked[i])) __builtin_trap();
    if (f.oversized) {
      if (f.header.length <= capsule::ttrpc::kMaxPayloadBytes) __builtin_trap();
      offset += capsule::ttrpc::kFrameHeaderSize + f.header.length;
    } else {
      if (f.payload.size() != f.header.length) __builtin_trap();
      std::string re = capsule::ttrpc::EncodeFrame(
          f.header.stream_id, capsule::ttrpc::FrameType::kRequest, f.payload);
      re[8] = static_cast<char>(f.header.type);
      re[9] = static_cast<char>(f.header.flags);
      if (in.substr(offset, re.size()) != re) __builtin_trap();
      offset += re.size();
    }
    auto action = stream.Classify(DecodedFrame(f));
    if (std::holds_alternative<capsule::ttrpc::CloseConnection>(action)) break;
  }
  return 0;
}
