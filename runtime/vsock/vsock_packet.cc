// Packet header codec and chain validation. The header may be split across
// descriptors in any way (VIRTIO_F_VERSION_1 implies ANY_LAYOUT), so it is
// gathered into a local copy before decoding.
#include "runtime/vsock/vsock_packet.h"

#include <endian.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace capsule::vsock {
namespace {

template <typename T>
void Put(uint8_t* p, T v) {
  if constexpr (sizeof(T) == 8) v = htole64(v);
  if constexpr (sizeof(T) == 4) v = htole32(v);
  if constexpr (sizeof(T) == 2) v = htole16(v);
  std::memcpy(p, &v, sizeof v);
}

template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (sizeof(T) == 8) return le64toh(v);
  if constexpr (sizeof(T) == 4) return le32toh(v);
  if constexpr (sizeof(T) == 2) return le16toh(v);
}

}  // namespace

std::string_view OpName(uint16_t op) {
  switch (static_cast<Op>(op)) {
    case Op::kInvalid: return "INVALID";
    case Op::kRequest: return "REQUEST";
    case Op::kResponse: return "RESPONSE";
    case Op::kRst: return "RST";
    case Op::kShutdown: return "SHUTDOWN";
    case Op::kRw: return "RW";
    case Op::kCreditUpdate: return "CREDIT_UPDATE";
    case Op::kCreditRequest: return "CREDIT_REQUEST";
  }
  return "UNKNOWN";
}

std::string PacketHeader::ToString() const {
  return fmt::format("{} {}:{} -> {}:{} len={} type={} flags={} buf_alloc={} fwd_cnt={}", OpName(op), src_cid,
                     src_port, dst_cid, dst_port, len, type, flags, buf_alloc, fwd_cnt);
}

// Offsets from struct virtio_vsock_hdr (packed).
void EncodeHeader(const PacketHeader& h, uint8_t out[kPacketHeaderSize]) {
  Put<uint64_t>(out + 0, h.src_cid);
  Put<uint64_t>(out + 8, h.dst_cid);
  Put<uint32_t>(out + 16, h.src_port);
  Put<uint32_t>(out + 20, h.dst_port);
  Put<uint32_t>(out + 24, h.len);
  Put<uint16_t>(out + 28, h.type);
  Put<uint16_t>(out + 30, h.op);
  Put<uint32_t>(out + 32, h.flags);
  Put<uint32_t>(out + 36, h.buf_alloc);
  Put<uint32_t>(out + 40, h.fwd_cnt);
}

PacketHeader DecodeHeader(const uint8_t in[kPacketHeaderSize]) {
  PacketHeader h;
  h.src_cid = Get<uint64_t>(in + 0);
  h.dst_cid = Get<uint64_t>(in + 8);
  h.src_port = Get<uint32_t>(in + 16);
  h.dst_port = Get<uint32_t>(in + 20);
  h.len = Get<uint32_t>(in + 24);
  h.type = Get<uint16_t>(in + 28);
  h.op = Get<uint16_t>(in + 30);
  h.flags = Get<uint32_t>(in + 32);
  h.buf_alloc = Get<uint32_t>(in + 36);
  h.fwd_cnt = Get<uint32_t>(in + 40);
  return h;
}

size_t GatherBytes(const std::vector<iovec>& iov, size_t offset, uint8_t* out, size_t len) {
  size_t copied = 0;
  for (const iovec& v : iov) {
    if (copied == len) break;
    if (offset >= v.iov_len) {
      offset -= v.iov_len;
      continue;
    }
    size_t n = std::min(v.iov_len - offset, len - copied);
    std::memcpy(out + copied, static_cast<const uint8_t*>(v.iov_base) + offset, n);
    copied += n;
    offset = 0;
  }
  return copied;
}

std::vector<iovec> SliceIovecs(const std::vector<iovec>& iov, size_t offset, size_t len) {
  std::vector<iovec> out;
  for (const iovec& v : iov) {
    if (len == 0) break;
    if (offset >= v.iov_len) {
      offset -= v.iov_len;
      continue;
    }
    size_t n = std::min(v.iov_len - offset, len);
    out.push_back(iovec{static_cast<uint8_t*>(v.iov_base) + offset, n});
    len -= n;
    offset = 0;
  }
  return out;
}

Result<TxPacket> ParseTxPacket(const DescChain& chain) {
  if (!chain.writable.empty()) return InvalidArgument("tx chain has device-writable buffers");
  if (chain.readable_len < kPacketHeaderSize)
    return InvalidArgument(fmt::format("tx chain holds {} bytes, less than a header", chain.readable_len));
  uint8_t raw[kPacketHeaderSize];
  GatherBytes(chain.readable, 0, raw, kPacketHeaderSize);
  TxPacket pkt;
  pkt.hdr = DecodeHeader(raw);
  if (pkt.hdr.len > kMaxPacketPayload)
    return InvalidArgument(fmt::format("packet len {} above the {} maximum", pkt.hdr.len, kMaxPacketPayload));
  if (pkt.hdr.len > chain.readable_len - kPacketHeaderSize)
    return InvalidArgument(fmt::format("packet len {} but only {} payload bytes in the chain", pkt.hdr.len,
                                       chain.readable_len - kPacketHeaderSize));
  pkt.payload = SliceIovecs(chain.readable, kPacketHeaderSize, pkt.hdr.len);
  return pkt;
}

bool WriteRxHeader(const DescChain& chain, const PacketHeader& h) {
  if (chain.writable_len < kPacketHeaderSize) return false;
  uint8_t raw[kPacketHeaderSize];
  EncodeHeader(h, raw);
  size_t done = 0;
  for (const iovec& v : chain.writable) {
    size_t n = std::min(v.iov_len, kPacketHeaderSize - done);
    std::memcpy(v.iov_base, raw + done, n);
    done += n;
    if (done == kPacketHeaderSize) break;
  }
  return true;
}

std::vector<iovec> RxPayloadIovecs(const DescChain& chain, uint64_t max) {
  if (chain.writable_len <= kPacketHeaderSize) return {};
  uint64_t room = std::min<uint64_t>(chain.writable_len - kPacketHeaderSize, max);
  return SliceIovecs(chain.writable, kPacketHeaderSize, static_cast<size_t>(room));
}

size_t CopyToRxPayload(const DescChain& chain, std::string_view data) {
  size_t done = 0;
  for (const iovec& v : RxPayloadIovecs(chain, data.size())) {
    std::memcpy(v.iov_base, data.data() + done, v.iov_len);
    done += v.iov_len;
  }
  return done;
}

}  // namespace capsule::vsock
