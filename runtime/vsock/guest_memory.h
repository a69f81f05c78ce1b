// GuestMemory: the guest RAM regions QEMU shares with the back end
// (VHOST_USER_SET_MEM_TABLE), mapped into this process. Translates guest
// physical addresses (descriptor buffers) and QEMU user addresses (ring
// locations) to host pointers, checking every byte lies inside a region.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::vsock {

// One region as VHOST_USER_SET_MEM_TABLE describes it.
struct MemoryRegionDesc {
  uint64_t guest_phys_addr = 0;
  uint64_t size = 0;
  uint64_t user_addr = 0;    // the region's address in QEMU's address space
  uint64_t mmap_offset = 0;  // where the region starts in its fd
};

class GuestMemory;
using GuestMemoryPtr = std::unique_ptr<GuestMemory>;

class GuestMemory {
 public:
  // mmaps each region's fd (MAP_SHARED). `fds` pairs with `regions` by index.
  static Result<GuestMemoryPtr> Map(const std::vector<MemoryRegionDesc>& regions, std::vector<UniqueFd> fds);
  // Wraps memory this process already owns (tests, fuzzing); never unmapped.
  static GuestMemoryPtr FromBuffer(uint8_t* base, const MemoryRegionDesc& region);

  ~GuestMemory();
  GuestMemory(const GuestMemory&) = delete;
  GuestMemory& operator=(const GuestMemory&) = delete;

  // Host pointer for [gpa, gpa+len) when it lies inside one region, else nullptr.
  uint8_t* GpaToHost(uint64_t gpa, uint64_t len) const;
  // Same for QEMU user addresses (vring addresses).
  uint8_t* UvaToHost(uint64_t uva, uint64_t len) const;
  // Appends iovecs covering [gpa, gpa+len), which may span adjacent regions.
  // False (and `out` unchanged) when any byte is outside guest memory.
  bool GpaToIovecs(uint64_t gpa, uint64_t len, std::vector<iovec>* out) const;

  size_t region_count() const { return regions_.size(); }

 private:
  struct Region {
    MemoryRegionDesc desc;
    uint8_t* host = nullptr;  // host address of guest_phys_addr
    void* map_base = nullptr;  // what munmap needs (nullptr: not ours)
    size_t map_len = 0;
  };
  GuestMemory() = default;
  const Region* FindGpa(uint64_t gpa) const;

  std::vector<Region> regions_;
};

}  // namespace capsule::vsock
