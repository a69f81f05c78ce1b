// ttrpc wire framing: a 10-byte big-endian header (payload length, stream id,
// type, flags) before each payload. FrameDecoder turns a byte stream that
// arrives in arbitrary pieces into whole frames; oversized frames are skipped
// without buffering and reported once their bytes have gone by.
#pragma once

#include <google/protobuf/message_lite.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace capsule::ttrpc {

// messageHeaderLength and messageLengthMax in containerd/ttrpc channel.go.
inline constexpr size_t kFrameHeaderSize = 10;
inline constexpr uint32_t kMaxPayloadBytes = 4u << 20;

// Message types from ttrpc channel.go (v1.1.1 knows only these two).
enum class FrameType : uint8_t { kRequest = 1, kResponse = 2 };

struct FrameHeader {
  uint32_t length = 0;  // payload bytes, header excluded
  uint32_t stream_id = 0;
  uint8_t type = 0;  // raw: a peer may send any value
  uint8_t flags = 0;
};

void EncodeFrameHeader(const FrameHeader& header, char out[kFrameHeaderSize]);
FrameHeader DecodeFrameHeader(const char in[kFrameHeaderSize]);

// Header + payload as one buffer, ready for a single write. The caller keeps
// payload.size() <= kMaxPayloadBytes (checked by the sender, which can answer
// with a status instead).
std::string EncodeFrame(uint32_t stream_id, FrameType type, std::string_view payload);
// The same for a message serialised straight behind the header (one buffer,
// no intermediate copy). The caller checks ByteSizeLong() against the limit.
std::string EncodeFrame(uint32_t stream_id, FrameType type,
                        const google::protobuf::MessageLite& message);

// One decoded unit: a whole frame, or the header of an oversized frame whose
// payload was discarded.
struct DecodedFrame {
  FrameHeader header;
  std::string payload;  // empty when oversized
  bool oversized = false;
};

class FrameDecoder {
 public:
  // Appends bytes read from the stream; any split is fine.
  void Feed(std::string_view bytes);
  // The next complete frame, or nullopt until more bytes arrive.
  std::optional<DecodedFrame> Next();
  // True when no partial header, payload or discard is pending; at EOF a
  // false value means the peer sent a truncated frame.
  bool AtFrameBoundary() const;
  // Bytes held for frames not yet returned.
  size_t buffered() const { return buffer_.size() - offset_; }

 private:
  void Compact();

  std::string buffer_;
  size_t offset_ = 0;  // start of unconsumed bytes in buffer_
  // Set while skipping an oversized payload: the header to report and how
  // many payload bytes are still to drop.
  std::optional<FrameHeader> discarding_;
  uint64_t discard_left_ = 0;
};

}  // namespace capsule::ttrpc
