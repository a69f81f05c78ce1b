// WebSocket framing (RFC 6455 section 5) for a client: frames the client
// sends (always FIN, always masked) and the decoding of frames a server
// sends (never masked). Pure functions over bytes; ChannelStream does the
// I/O, message reassembly and control-frame replies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::testing::streaming {

// Opcodes, RFC 6455 section 5.2.
enum class Opcode : uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

inline bool IsControl(Opcode op) { return (static_cast<uint8_t>(op) & 0x8) != 0; }

// Control frames carry at most 125 payload bytes (RFC 6455 section 5.5).
inline constexpr size_t kMaxControlPayload = 125;

// Close status codes used here (RFC 6455 section 7.4.1).
inline constexpr uint16_t kCloseNormal = 1000;
inline constexpr uint16_t kCloseProtocolError = 1002;
inline constexpr uint16_t kCloseTooBig = 1009;

struct Frame {
  bool fin = true;
  Opcode opcode = Opcode::kBinary;
  std::string payload;  // unmasked
};

// One client frame: FIN set, MASK set, `payload` XORed with `mask`; the
// 7-bit, 16-bit (126) or 64-bit (127) length form as the size needs.
std::string EncodeClientFrame(Opcode opcode, std::string_view payload, const std::array<uint8_t, 4>& mask);

// A close frame's payload: the 2-byte status code, big-endian, then `reason`
// (cut to fit a control frame).
std::string ClosePayload(uint16_t code, std::string_view reason = {});

// Decodes one server frame from the front of `buf`. Returns nullopt while
// `buf` does not yet hold the whole frame, and sets `*consumed` to the
// frame's size when it does. Refused (INVALID_ARGUMENT): reserved bits set
// (no extension is negotiated), a masked frame, an unknown opcode, a control
// frame fragmented or longer than 125 bytes, a 64-bit length with its top
// bit set. A payload longer than `max_payload` is refused from its header
// (RESOURCE_EXHAUSTED), before any of it is awaited.
Result<std::optional<Frame>> DecodeServerFrame(std::string_view buf, size_t max_payload, size_t* consumed);

}  // namespace capsule::testing::streaming
