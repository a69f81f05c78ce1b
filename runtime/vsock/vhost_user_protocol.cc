// Decoders for the vhost-user payloads the vsock back end serves. Every
// decoder checks the exact payload size for its request first.
#include "runtime/vsock/vhost_user_protocol.h"

#include <fmt/format.h>

#include <cstring>

namespace capsule::vsock::vhost_user {
namespace {

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void Append(std::vector<uint8_t>* out, T v) {
  size_t at = out->size();
  out->resize(at + sizeof v);
  std::memcpy(out->data() + at, &v, sizeof v);
}

Status SizeIs(const Message& m, size_t want) {
  if (m.payload.size() == want) return Status::Ok();
  return InvalidArgument(fmt::format("{}: payload of {} bytes, want {}", m.name(), m.payload.size(), want));
}

// Sizes of the payload structs on the wire.
constexpr size_t kU64Size = 8;
constexpr size_t kVringStateSize = 8;
constexpr size_t kVringAddrSize = 40;
constexpr size_t kMemRegionSize = 32;
constexpr size_t kMemTableHeadSize = 8;  // nregions + padding
constexpr size_t kConfigHeadSize = 12;   // offset, size, flags

}  // namespace

std::string_view RequestName(uint32_t request) {
  switch (static_cast<Request>(request)) {
    case Request::kGetFeatures: return "GET_FEATURES";
    case Request::kSetFeatures: return "SET_FEATURES";
    case Request::kSetOwner: return "SET_OWNER";
    case Request::kResetOwner: return "RESET_OWNER";
    case Request::kSetMemTable: return "SET_MEM_TABLE";
    case Request::kSetLogBase: return "SET_LOG_BASE";
    case Request::kSetLogFd: return "SET_LOG_FD";
    case Request::kSetVringNum: return "SET_VRING_NUM";
    case Request::kSetVringAddr: return "SET_VRING_ADDR";
    case Request::kSetVringBase: return "SET_VRING_BASE";
    case Request::kGetVringBase: return "GET_VRING_BASE";
    case Request::kSetVringKick: return "SET_VRING_KICK";
    case Request::kSetVringCall: return "SET_VRING_CALL";
    case Request::kSetVringErr: return "SET_VRING_ERR";
    case Request::kGetProtocolFeatures: return "GET_PROTOCOL_FEATURES";
    case Request::kSetProtocolFeatures: return "SET_PROTOCOL_FEATURES";
    case Request::kGetQueueNum: return "GET_QUEUE_NUM";
    case Request::kSetVringEnable: return "SET_VRING_ENABLE";
    case Request::kSetBackendReqFd: return "SET_BACKEND_REQ_FD";
    case Request::kGetConfig: return "GET_CONFIG";
    case Request::kSetConfig: return "SET_CONFIG";
    case Request::kResetDevice: return "RESET_DEVICE";
    case Request::kGetMaxMemSlots: return "GET_MAX_MEM_SLOTS";
    case Request::kSetStatus: return "SET_STATUS";
    case Request::kGetStatus: return "GET_STATUS";
  }
  return "UNKNOWN";
}

Result<Header> DecodeHeader(const uint8_t* data, size_t len) {
  if (len < kHeaderSize) return InvalidArgument(fmt::format("vhost-user header: {} bytes, want {}", len, kHeaderSize));
  Header h;
  h.request = Load<uint32_t>(data);
  h.flags = Load<uint32_t>(data + 4);
  h.size = Load<uint32_t>(data + 8);
  if ((h.flags & kVersionMask) != kVersion)
    return InvalidArgument(fmt::format("vhost-user {} (request {}): version {} in flags 0x{:x}, want 1",
                                       RequestName(h.request), h.request, h.flags & kVersionMask, h.flags));
  if (h.size > kMaxPayloadSize)
    return InvalidArgument(fmt::format("vhost-user {} (request {}): payload size {} above {}",
                                       RequestName(h.request), h.request, h.size, kMaxPayloadSize));
  return h;
}

std::vector<uint8_t> EncodeHeader(const Header& h) {
  std::vector<uint8_t> out;
  Append(&out, h.request);
  Append(&out, h.flags);
  Append(&out, h.size);
  return out;
}

Result<uint64_t> DecodeU64(const Message& m) {
  RETURN_IF_ERROR(SizeIs(m, kU64Size));
  return Load<uint64_t>(m.payload.data());
}

Result<VringState> DecodeVringState(const Message& m) {
  RETURN_IF_ERROR(SizeIs(m, kVringStateSize));
  return VringState{Load<uint32_t>(m.payload.data()), Load<uint32_t>(m.payload.data() + 4)};
}

Result<VringAddr> DecodeVringAddr(const Message& m) {
  RETURN_IF_ERROR(SizeIs(m, kVringAddrSize));
  const uint8_t* p = m.payload.data();
  VringAddr a;
  a.index = Load<uint32_t>(p);
  a.flags = Load<uint32_t>(p + 4);
  a.desc = Load<uint64_t>(p + 8);
  a.used = Load<uint64_t>(p + 16);
  a.avail = Load<uint64_t>(p + 24);
  a.log = Load<uint64_t>(p + 32);
  return a;
}

Result<VringFile> DecodeVringFile(Message& m) {
  ASSIGN_OR_RETURN(uint64_t v, DecodeU64(m));
  VringFile f;
  f.index = static_cast<uint32_t>(v & kVringIndexMask);
  bool no_fd = (v & kVringNoFdFlag) != 0;
  if (no_fd != m.fds.empty() || m.fds.size() > 1)
    return InvalidArgument(fmt::format("{} for vring {}: {} fds with no-fd flag {}", m.name(), f.index,
                                       m.fds.size(), no_fd));
  if (!no_fd) f.fd = std::move(m.fds[0]);
  m.fds.clear();
  return f;
}

Result<std::vector<MemoryRegionDesc>> DecodeMemTable(Message& m, std::vector<UniqueFd>* fds) {
  if (m.payload.size() < kMemTableHeadSize)
    return InvalidArgument(fmt::format("SET_MEM_TABLE: payload of {} bytes", m.payload.size()));
  uint32_t n = Load<uint32_t>(m.payload.data());
  if (n == 0 || n > kMaxMemRegions)
    return InvalidArgument(fmt::format("SET_MEM_TABLE: {} regions (want 1..{})", n, kMaxMemRegions));
  // QEMU sends exactly the regions in use; accept a full 8-slot table too.
  size_t exact = kMemTableHeadSize + kMemRegionSize * n;
  size_t full = kMemTableHeadSize + kMemRegionSize * kMaxMemRegions;
  if (m.payload.size() != exact && m.payload.size() != full)
    return InvalidArgument(fmt::format("SET_MEM_TABLE: payload of {} bytes for {} regions", m.payload.size(), n));
  if (m.fds.size() != n)
    return InvalidArgument(fmt::format("SET_MEM_TABLE: {} regions but {} fds", n, m.fds.size()));
  std::vector<MemoryRegionDesc> regions;
  for (uint32_t i = 0; i < n; ++i) {
    const uint8_t* p = m.payload.data() + kMemTableHeadSize + kMemRegionSize * i;
    regions.push_back(MemoryRegionDesc{Load<uint64_t>(p), Load<uint64_t>(p + 8), Load<uint64_t>(p + 16),
                                       Load<uint64_t>(p + 24)});
  }
  *fds = std::move(m.fds);
  m.fds.clear();
  return regions;
}

Result<ConfigAccess> DecodeConfig(const Message& m, bool with_data) {
  if (m.payload.size() < kConfigHeadSize)
    return InvalidArgument(fmt::format("{}: payload of {} bytes", m.name(), m.payload.size()));
  ConfigAccess c;
  c.offset = Load<uint32_t>(m.payload.data());
  c.size = Load<uint32_t>(m.payload.data() + 4);
  c.flags = Load<uint32_t>(m.payload.data() + 8);
  if (c.size > kMaxConfigSize || c.offset > kMaxConfigSize - c.size)
    return InvalidArgument(fmt::format("{}: offset {} size {} beyond {}", m.name(), c.offset, c.size, kMaxConfigSize));
  // GET_CONFIG carries a placeholder of `size` bytes; SET_CONFIG the data.
  if (m.payload.size() != kConfigHeadSize + c.size)
    return InvalidArgument(fmt::format("{}: payload of {} bytes for size {}", m.name(), m.payload.size(), c.size));
  if (with_data) c.data.assign(m.payload.begin() + kConfigHeadSize, m.payload.end());
  return c;
}

std::vector<uint8_t> EncodeU64(uint64_t v) {
  std::vector<uint8_t> out;
  Append(&out, v);
  return out;
}

std::vector<uint8_t> EncodeVringState(const VringState& s) {
  std::vector<uint8_t> out;
  Append(&out, s.index);
  Append(&out, s.num);
  return out;
}

std::vector<uint8_t> EncodeConfig(uint32_t offset, uint32_t flags, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  Append(&out, offset);
  Append(&out, static_cast<uint32_t>(data.size()));
  Append(&out, flags);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace capsule::vsock::vhost_user
