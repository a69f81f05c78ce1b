// Frame header (de)serialisation and the incremental decoder. The decoder
// never buffers more than one header plus kMaxPayloadBytes of payload.
#include "runtime/ttrpc/frame.h"

#include <algorithm>

namespace capsule::ttrpc {
namespace {

void PutU32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

uint32_t GetU32(const char* p) {
  auto b = [p](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

// Compact once the consumed prefix is at least this large and at least half
// of the buffer, so memmove cost stays linear in the bytes fed.
constexpr size_t kCompactThresholdBytes = 64 * 1024;

}  // namespace

void EncodeFrameHeader(const FrameHeader& header, char out[kFrameHeaderSize]) {
  PutU32(out, header.length);
  PutU32(out + 4, header.stream_id);
  out[8] = static_cast<char>(header.type);
  out[9] = static_cast<char>(header.flags);
}

FrameHeader DecodeFrameHeader(const char in[kFrameHeaderSize]) {
  FrameHeader h;
  h.length = GetU32(in);
  h.stream_id = GetU32(in + 4);
  h.type = static_cast<uint8_t>(in[8]);
  h.flags = static_cast<uint8_t>(in[9]);
  return h;
}

std::string EncodeFrame(uint32_t stream_id, FrameType type, std::string_view payload) {
  std::string out(kFrameHeaderSize + payload.size(), '\0');
  FrameHeader h{static_cast<uint32_t>(payload.size()), stream_id, static_cast<uint8_t>(type), 0};
  EncodeFrameHeader(h, out.data());
  std::copy(payload.begin(), payload.end(), out.begin() + kFrameHeaderSize);
  return out;
}

std::string EncodeFrame(uint32_t stream_id, FrameType type,
                        const google::protobuf::MessageLite& message) {
  const size_t size = message.ByteSizeLong();
  std::string out(kFrameHeaderSize + size, '\0');
  FrameHeader h{static_cast<uint32_t>(size), stream_id, static_cast<uint8_t>(type), 0};
  EncodeFrameHeader(h, out.data());
  message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data()) + kFrameHeaderSize);
  return out;
}

void FrameDecoder::Feed(std::string_view bytes) {
  if (discarding_ && buffered() == 0) {
    // Skip payload bytes of an oversized frame without copying them.
    size_t drop = static_cast<size_t>(std::min<uint64_t>(discard_left_, bytes.size()));
    discard_left_ -= drop;
    bytes.remove_prefix(drop);
  }
  Compact();
  buffer_.append(bytes);
}

std::optional<DecodedFrame> FrameDecoder::Next() {
  if (discarding_) {
    size_t drop = static_cast<size_t>(std::min<uint64_t>(discard_left_, buffered()));
    offset_ += drop;
    discard_left_ -= drop;
    if (discard_left_ > 0) return std::nullopt;
    DecodedFrame out{*discarding_, {}, true};
    discarding_.reset();
    return out;
  }
  if (buffered() < kFrameHeaderSize) return std::nullopt;
  FrameHeader h = DecodeFrameHeader(buffer_.data() + offset_);
  if (h.length > kMaxPayloadBytes) {
    offset_ += kFrameHeaderSize;
    discarding_ = h;
    discard_left_ = h.length;
    return Next();
  }
  // No reserve() for the announced length: ten bytes from a peer must not
  // buy a 4 MiB allocation. Appends grow the buffer geometrically instead.
  if (buffered() < kFrameHeaderSize + h.length) return std::nullopt;
  DecodedFrame out;
  out.header = h;
  out.payload.assign(buffer_, offset_ + kFrameHeaderSize, h.length);
  offset_ += kFrameHeaderSize + h.length;
  return out;
}

bool FrameDecoder::AtFrameBoundary() const { return !discarding_ && buffered() == 0; }

void FrameDecoder::Compact() {
  if (offset_ == buffer_.size()) {
    buffer_.clear();
    offset_ = 0;
  } else if (offset_ >= kCompactThresholdBytes && offset_ * 2 >= buffer_.size()) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
}

}  // namespace capsule::ttrpc
