// virtio-vsock packets (virtio spec 5.10.6, linux/virtio_vsock.h): a 44-byte
// little-endian header followed by `len` payload bytes, carried in one
// descriptor chain. Parsing validates a guest's chain before any field is
// trusted; writing fills an rx chain's device-writable buffers.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/vsock/virtqueue.h"

namespace capsule::vsock {

// From linux/virtio_vsock.h and the virtio spec.
inline constexpr size_t kPacketHeaderSize = 44;
inline constexpr uint64_t kHostCid = 2;  // VMADDR_CID_HOST
inline constexpr uint16_t kTypeStream = 1;
inline constexpr uint16_t kTypeSeqpacket = 2;
inline constexpr uint32_t kShutdownRcv = 1;   // VIRTIO_VSOCK_SHUTDOWN_RCV: sender receives no more
inline constexpr uint32_t kShutdownSend = 2;  // VIRTIO_VSOCK_SHUTDOWN_SEND: sender sends no more
inline constexpr uint32_t kShutdownBoth = kShutdownRcv | kShutdownSend;
// VIRTIO_VSOCK_MAX_PKT_BUF_SIZE: the most payload one packet may carry.
inline constexpr uint32_t kMaxPacketPayload = 64 * 1024;

enum class Op : uint16_t {
  kInvalid = 0,
  kRequest = 1,
  kResponse = 2,
  kRst = 3,
  kShutdown = 4,
  kRw = 5,
  kCreditUpdate = 6,
  kCreditRequest = 7,
};
std::string_view OpName(uint16_t op);

struct PacketHeader {
  uint64_t src_cid = 0;
  uint64_t dst_cid = 0;
  uint32_t src_port = 0;
  uint32_t dst_port = 0;
  uint32_t len = 0;
  uint16_t type = kTypeStream;
  uint16_t op = 0;
  uint32_t flags = 0;
  uint32_t buf_alloc = 0;
  uint32_t fwd_cnt = 0;

  Op operation() const { return static_cast<Op>(op); }
  std::string ToString() const;
};

void EncodeHeader(const PacketHeader& h, uint8_t out[kPacketHeaderSize]);
PacketHeader DecodeHeader(const uint8_t in[kPacketHeaderSize]);

// A packet the guest sent on the tx queue: header plus payload iovecs that
// still point into guest memory (no copy).
struct TxPacket {
  PacketHeader hdr;
  std::vector<iovec> payload;  // exactly hdr.len bytes
};

// Validates a tx chain: only device-readable buffers, a whole header, and
// hdr.len no larger than kMaxPacketPayload nor than the bytes present.
Result<TxPacket> ParseTxPacket(const DescChain& chain);

// Writes `h` at the start of an rx chain's writable buffers. False when the
// chain cannot hold a header.
bool WriteRxHeader(const DescChain& chain, const PacketHeader& h);
// The writable iovecs after the header, clipped to `max` bytes (where
// payload is read into directly).
std::vector<iovec> RxPayloadIovecs(const DescChain& chain, uint64_t max);
// Copies `data` into the payload area; returns bytes copied.
size_t CopyToRxPayload(const DescChain& chain, std::string_view data);

// Byte helpers over scattered buffers.
size_t GatherBytes(const std::vector<iovec>& iov, size_t offset, uint8_t* out, size_t len);
std::vector<iovec> SliceIovecs(const std::vector<iovec>& iov, size_t offset, size_t len);

}  // namespace capsule::vsock
