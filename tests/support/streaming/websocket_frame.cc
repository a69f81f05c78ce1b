// RFC 6455 frame encoding (client side) and decoding (server frames).
#include "tests/support/streaming/websocket_frame.h"

#include <fmt/format.h>

namespace capsule::testing::streaming {
namespace {

constexpr uint8_t kFinBit = 0x80;
constexpr uint8_t kRsvBits = 0x70;
constexpr uint8_t kOpcodeBits = 0x0F;
constexpr uint8_t kMaskBit = 0x80;
constexpr uint8_t kLen16 = 126;  // the next 2 bytes hold the length
constexpr uint8_t kLen64 = 127;  // the next 8 bytes hold the length

bool KnownOpcode(uint8_t op) {
  switch (static_cast<Opcode>(op)) {
    case Opcode::kContinuation:
    case Opcode::kText:
    case Opcode::kBinary:
    case Opcode::kClose:
    case Opcode::kPing:
    case Opcode::kPong:
      return true;
  }
  return false;
}

void AppendBigEndian(std::string* out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

uint64_t ReadBigEndian(std::string_view bytes) {
  uint64_t v = 0;
  for (char c : bytes) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

}  // namespace

std::string EncodeClientFrame(Opcode opcode, std::string_view payload, const std::array<uint8_t, 4>& mask) {
  std::string out;
  out.reserve(payload.size() + 14);
  out.push_back(static_cast<char>(kFinBit | static_cast<uint8_t>(opcode)));
  const uint64_t n = payload.size();
  if (n < kLen16) {
    out.push_back(static_cast<char>(kMaskBit | n));
  } else if (n <= 0xFFFF) {
    out.push_back(static_cast<char>(kMaskBit | kLen16));
    AppendBigEndian(&out, n, 2);
  } else {
    out.push_back(static_cast<char>(kMaskBit | kLen64));
    AppendBigEndian(&out, n, 8);
  }
  for (uint8_t m : mask) out.push_back(static_cast<char>(m));
  for (size_t i = 0; i < payload.size(); ++i)
    out.push_back(static_cast<char>(static_cast<uint8_t>(payload[i]) ^ mask[i % 4]));
  return out;
}

std::string ClosePayload(uint16_t code, std::string_view reason) {
  std::string out;
  AppendBigEndian(&out, code, 2);
  out.append(reason.substr(0, kMaxControlPayload - 2));
  return out;
}

Result<std::optional<Frame>> DecodeServerFrame(std::string_view buf, size_t max_payload, size_t* consumed) {
  *consumed = 0;
  if (buf.size() < 2) return std::optional<Frame>();
  const auto b0 = static_cast<uint8_t>(buf[0]);
  const auto b1 = static_cast<uint8_t>(buf[1]);
  if ((b0 & kRsvBits) != 0)
    return InvalidArgument(
        fmt::format("frame with reserved bits {:#x} set (no extension was negotiated)", b0 & kRsvBits));
  const uint8_t op = b0 & kOpcodeBits;
  if (!KnownOpcode(op)) return InvalidArgument(fmt::format("frame with unknown opcode {:#x}", op));
  if ((b1 & kMaskBit) != 0) return InvalidArgument("masked frame from the server (RFC 6455 5.1 forbids it)");
  Frame frame;
  frame.fin = (b0 & kFinBit) != 0;
  frame.opcode = static_cast<Opcode>(op);

  size_t header = 2;
  uint64_t length = b1 & 0x7F;
  if (length == kLen16 || length == kLen64) {
    const size_t extra = length == kLen16 ? 2 : 8;
    if (buf.size() < header + extra) return std::optional<Frame>();
    length = ReadBigEndian(buf.substr(header, extra));
    header += extra;
    if (extra == 8 && (length >> 63) != 0)
      return InvalidArgument(fmt::format("frame length {:#x} has its most significant bit set", length));
  }
  if (IsControl(frame.opcode)) {
    if (!frame.fin) return InvalidArgument(fmt::format("fragmented control frame (opcode {:#x})", op));
    if (length > kMaxControlPayload)
      return InvalidArgument(fmt::format("control frame (opcode {:#x}) of {} bytes, over 125", op, length));
  }
  if (length > max_payload)
    return ResourceExhausted(fmt::format("frame of {} bytes is over the limit of {} bytes", length, max_payload));
  if (buf.size() - header < length) return std::optional<Frame>();
  frame.payload.assign(buf.substr(header, static_cast<size_t>(length)));
  *consumed = header + static_cast<size_t>(length);
  return std::optional<Frame>(std::move(frame));
}

}  // namespace capsule::testing::streaming
