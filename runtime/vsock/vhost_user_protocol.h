// vhost-user wire format (QEMU docs/interop/vhost-user.rst): a 12-byte
// header {request, flags, size} in host byte order, `size` payload bytes,
// file descriptors as SCM_RIGHTS. Decoders check sizes and counts exactly so
// a malformed message becomes an error naming the request, never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/guest_memory.h"

namespace capsule::vsock::vhost_user {

enum class Request : uint32_t {
  kGetFeatures = 1,
  kSetFeatures = 2,
  kSetOwner = 3,
  kResetOwner = 4,
  kSetMemTable = 5,
  kSetLogBase = 6,
  kSetLogFd = 7,
  kSetVringNum = 8,
  kSetVringAddr = 9,
  kSetVringBase = 10,
  kGetVringBase = 11,
  kSetVringKick = 12,
  kSetVringCall = 13,
  kSetVringErr = 14,
  kGetProtocolFeatures = 15,
  kSetProtocolFeatures = 16,
  kGetQueueNum = 17,
  kSetVringEnable = 18,
  kSetBackendReqFd = 21,
  kGetConfig = 24,
  kSetConfig = 25,
  kResetDevice = 34,
  kGetMaxMemSlots = 36,
  kSetStatus = 39,
  kGetStatus = 40,
};
std::string_view RequestName(uint32_t request);

// Header flags.
inline constexpr uint32_t kVersion = 0x1;
inline constexpr uint32_t kVersionMask = 0x3;
inline constexpr uint32_t kReplyFlag = 0x4;
inline constexpr uint32_t kNeedReplyFlag = 0x8;

inline constexpr size_t kHeaderSize = 12;
// Largest payload of any request we serve (memory table: 8 + 8*32; config
// space: 12 + 256). Anything larger cannot be a message we understand.
inline constexpr size_t kMaxPayloadSize = 4096;
// VHOST_MEMORY_BASELINE_NREGIONS: regions (and fds) per SET_MEM_TABLE.
inline constexpr size_t kMaxMemRegions = 8;
// VHOST_USER_MAX_CONFIG_SIZE.
inline constexpr uint32_t kMaxConfigSize = 256;

// Virtio feature bit that gates protocol-feature negotiation.
inline constexpr uint64_t kFeatureProtocolFeatures = 1ULL << 30;

// VHOST_USER_PROTOCOL_F_* bits.
inline constexpr uint64_t kProtocolMq = 1ULL << 0;
inline constexpr uint64_t kProtocolReplyAck = 1ULL << 3;
inline constexpr uint64_t kProtocolConfig = 1ULL << 9;

// SET_VRING_KICK/CALL/ERR payload: bits 0-7 queue index, bit 8 "no fd".
inline constexpr uint64_t kVringIndexMask = 0xff;
inline constexpr uint64_t kVringNoFdFlag = 0x100;

// VhostUserConfig flags: 1 = written by live migration.
inline constexpr uint32_t kConfigFlagMigration = 1;

struct Header {
  uint32_t request = 0;
  uint32_t flags = 0;
  uint32_t size = 0;
};

struct Message {
  Header hdr;
  std::vector<uint8_t> payload;
  std::vector<UniqueFd> fds;

  std::string_view name() const { return RequestName(hdr.request); }
  bool need_reply() const { return (hdr.flags & kNeedReplyFlag) != 0; }
};

struct VringState {
  uint32_t index = 0;
  uint32_t num = 0;
};

struct VringAddr {
  uint32_t index = 0;
  uint32_t flags = 0;
  uint64_t desc = 0;
  uint64_t used = 0;
  uint64_t avail = 0;
  uint64_t log = 0;
};

struct VringFile {
  uint32_t index = 0;
  UniqueFd fd;  // invalid when the front end asked for polling
};

struct ConfigAccess {
  uint32_t offset = 0;
  uint32_t size = 0;
  uint32_t flags = 0;
  std::vector<uint8_t> data;  // SET_CONFIG only
};

// Header bytes -> Header; the version must be 1 and size within bounds.
Result<Header> DecodeHeader(const uint8_t* data, size_t len);
std::vector<uint8_t> EncodeHeader(const Header& h);

Result<uint64_t> DecodeU64(const Message& m);
Result<VringState> DecodeVringState(const Message& m);
Result<VringAddr> DecodeVringAddr(const Message& m);
// Takes the message's fd (if any) out.
Result<VringFile> DecodeVringFile(Message& m);
// Takes the fds out; one per region.
Result<std::vector<MemoryRegionDesc>> DecodeMemTable(Message& m, std::vector<UniqueFd>* fds);
Result<ConfigAccess> DecodeConfig(const Message& m, bool with_data);

// Reply payload builders.
std::vector<uint8_t> EncodeU64(uint64_t v);
std::vector<uint8_t> EncodeVringState(const VringState& s);
std::vector<uint8_t> EncodeConfig(uint32_t offset, uint32_t flags, const std::vector<uint8_t>& data);

}  // namespace capsule::vsock::vhost_user
