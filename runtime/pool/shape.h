// A pool shape: what a pooled VM is made of. Its key hashes the size with
// everything else a VM boots from — the identity (path, size, mtime, inode)
// of the kernel, the initrd and the QEMU binary, and the hypervisor, vsock
// and virtio-fs settings — so that a changed image or setting never hands
// out a VM booted from the old one.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/common/status.h"
#include "runtime/config/config.h"

namespace capsule::pool {

struct Shape {
  uint32_t vcpus = 0;       // 0: guest.default_vcpus
  uint32_t memory_mib = 0;  // 0: guest.default_memory_mib
  bool operator==(const Shape&) const = default;
};

// Zeros replaced by the config's defaults.
Shape Resolve(const config::Config& config, Shape shape);

// 16 hex digits; an error names a file that cannot be stat'ed.
Result<std::string> ShapeKey(const config::Config& config, const Shape& resolved);

std::string Describe(const Shape& shape);  // "1 vCPU, 256 MiB"

}  // namespace capsule::pool
