// Mapping and bounds-checked translation of shared guest RAM. Every address
// here comes from QEMU or the guest, so all arithmetic is overflow-checked.
#include "runtime/vsock/guest_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>

namespace capsule::vsock {
namespace {

// VHOST_MEMORY_BASELINE_NREGIONS in QEMU: SET_MEM_TABLE carries at most 8.
constexpr size_t kMaxRegions = 8;

// True when [addr, addr+len) lies within [base, base+size).
bool Contains(uint64_t base, uint64_t size, uint64_t addr, uint64_t len) {
  if (addr < base) return false;
  uint64_t off = addr - base;
  return off <= size && len <= size - off;
}

}  // namespace

Result<GuestMemoryPtr> GuestMemory::Map(const std::vector<MemoryRegionDesc>& regions, std::vector<UniqueFd> fds) {
  if (regions.empty() || regions.size() > kMaxRegions)
    return InvalidArgument(fmt::format("memory table: {} regions (want 1..{})", regions.size(), kMaxRegions));
  if (fds.size() != regions.size())
    return InvalidArgument(fmt::format("memory table: {} regions but {} fds", regions.size(), fds.size()));
  GuestMemoryPtr mem(new GuestMemory());
  for (size_t i = 0; i < regions.size(); ++i) {
    const MemoryRegionDesc& r = regions[i];
    if (r.size == 0 || r.mmap_offset > UINT64_MAX - r.size || r.guest_phys_addr > UINT64_MAX - r.size ||
        r.user_addr > UINT64_MAX - r.size || r.mmap_offset + r.size > SIZE_MAX)
      return InvalidArgument(fmt::format("memory region {}: bad size 0x{:x} or offset 0x{:x}", i, r.size, r.mmap_offset));
    size_t len = static_cast<size_t>(r.mmap_offset + r.size);
    // A mapping past the end of a file maps fine, but the first access
    // there raises SIGBUS: a region must lie within its file (memfd,
    // hugetlbfs or tmpfs file: all regular, with their size in st_size).
    struct stat st {};
    if (::fstat(fds[i].get(), &st) != 0) return ErrnoStatus(fmt::format("fstat the fd of memory region {}", i));
    if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < r.mmap_offset + r.size)
      return InvalidArgument(fmt::format("memory region {}: offset 0x{:x} + size 0x{:x} is past the end of its file "
                                         "(0x{:x} bytes)", i, r.mmap_offset, r.size, st.st_size));
    void* base = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fds[i].get(), 0);
    if (base == MAP_FAILED)
      return ErrnoStatus(fmt::format("mmap memory region {} (0x{:x} bytes at gpa 0x{:x})", i, r.size, r.guest_phys_addr));
    Region reg;
    reg.desc = r;
    reg.host = static_cast<uint8_t*>(base) + r.mmap_offset;
    reg.map_base = base;
    reg.map_len = len;
    mem->regions_.push_back(reg);
  }
  // The mappings keep the memory alive; the fds are not needed any more.
  return mem;
}

GuestMemoryPtr GuestMemory::FromBuffer(uint8_t* base, const MemoryRegionDesc& region) {
  GuestMemoryPtr mem(new GuestMemory());
  Region reg;
  reg.desc = region;
  reg.host = base;
  mem->regions_.push_back(reg);
  return mem;
}

GuestMemory::~GuestMemory() {
  for (const Region& r : regions_) {
    if (r.map_base != nullptr) ::munmap(r.map_base, r.map_len);
  }
}

const GuestMemory::Region* GuestMemory::FindGpa(uint64_t gpa) const {
  for (const Region& r : regions_) {
    if (gpa >= r.desc.guest_phys_addr && gpa - r.desc.guest_phys_addr < r.desc.size) return &r;
  }
  return nullptr;
}

uint8_t* GuestMemory::GpaToHost(uint64_t gpa, uint64_t len) const {
  for (const Region& r : regions_) {
    if (Contains(r.desc.guest_phys_addr, r.desc.size, gpa, len)) return r.host + (gpa - r.desc.guest_phys_addr);
  }
  return nullptr;
}

uint8_t* GuestMemory::UvaToHost(uint64_t uva, uint64_t len) const {
  for (const Region& r : regions_) {
    if (Contains(r.desc.user_addr, r.desc.size, uva, len)) return r.host + (uva - r.desc.user_addr);
  }
  return nullptr;
}

bool GuestMemory::GpaToIovecs(uint64_t gpa, uint64_t len, std::vector<iovec>* out) const {
  if (gpa > UINT64_MAX - len) return false;
  size_t start = out->size();
  while (len > 0) {
    const Region* r = FindGpa(gpa);
    if (r == nullptr) {
      out->resize(start);
      return false;
    }
    uint64_t off = gpa - r->desc.guest_phys_addr;
    uint64_t chunk = std::min(len, r->desc.size - off);
    out->push_back(iovec{r->host + off, static_cast<size_t>(chunk)});
    gpa += chunk;
    len -= chunk;
  }
  return true;
}

}  // namespace capsule::vsock
