#include "agent/system/fw_cfg.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <sys/io.h>
#define CAPSULE_FW_CFG_PORTS 1
#else
#define CAPSULE_FW_CFG_PORTS 0
#endif

namespace capsule::agent::system {
namespace {

#if CAPSULE_FW_CFG_PORTS
// QEMU docs/specs/fw_cfg.rst: the traditional (non-DMA) x86 interface.
constexpr unsigned short kSelectorPort = 0x510;
constexpr unsigned short kDataPort = 0x511;
constexpr uint16_t kSignatureKey = 0x0000;
constexpr uint16_t kFileDirKey = 0x0019;
constexpr size_t kFileNameBytes = 56;
// QEMU caps fw_cfg files at a few thousand entries; a bigger count is not
// fw_cfg (or is hostile firmware) and is refused instead of looped over.
constexpr uint32_t kMaxFiles = 4096;

std::mutex port_mu;

void Select(uint16_t key) { outw(key, kSelectorPort); }

void ReadBytes(void* out, size_t n) {
  auto* p = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < n; ++i) p[i] = inb(kDataPort);
}

uint32_t Be32(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}
#endif

}  // namespace

Result<std::optional<std::string>> ReadFwCfgFile(std::string_view name, size_t max_bytes) {
#if CAPSULE_FW_CFG_PORTS
  if (name.empty() || name.size() >= kFileNameBytes) return InvalidArgument(fmt::format("fw_cfg name '{}'", name));
  std::lock_guard lock(port_mu);
  if (::ioperm(kSelectorPort, 2, 1) != 0) return ErrnoStatus("ioperm for the fw_cfg ports 0x510-0x511");
  struct Release {
    ~Release() { (void)::ioperm(kSelectorPort, 2, 0); }
  } release;
  char signature[4];
  Select(kSignatureKey);
  ReadBytes(signature, sizeof signature);
  if (std::memcmp(signature, "QEMU", 4) != 0) return std::optional<std::string>();
  unsigned char count_be[4];
  Select(kFileDirKey);
  ReadBytes(count_be, sizeof count_be);
  const uint32_t count = Be32(count_be);
  if (count > kMaxFiles) return InvalidArgument(fmt::format("fw_cfg directory claims {} files", count));
  for (uint32_t i = 0; i < count; ++i) {
    unsigned char entry[64];  // be32 size, be16 select, u16 reserved, name[56]
    ReadBytes(entry, sizeof entry);
    const char* entry_name = reinterpret_cast<const char*>(entry + 8);
    if (std::string_view(entry_name, strnlen(entry_name, kFileNameBytes)) != name) continue;
    const uint32_t size = Be32(entry);
    if (size > max_bytes) return InvalidArgument(fmt::format("fw_cfg file {} is {} bytes, over {}", name, size, max_bytes));
    const uint16_t key = static_cast<uint16_t>((entry[4] << 8) | entry[5]);
    std::string contents(size, '\0');
    Select(key);
    ReadBytes(contents.data(), size);
    return std::optional<std::string>(std::move(contents));
  }
  return std::optional<std::string>();
#else
  (void)name;
  (void)max_bytes;
  return std::optional<std::string>();
#endif
}

}  // namespace capsule::agent::system
