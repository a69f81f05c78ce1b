// What a QEMU binary can do, learned by running it once (-M none, QMP over a
// socketpair): its version and whether it was built with -sandbox (seccomp).
// Cached in a file keyed by the binary's identity, so a shim per pod does
// not pay a QEMU start for it.
#pragma once

#include <chrono>
#include <string>

#include "runtime/common/status.h"

namespace capsule::hypervisor {

struct QemuCapabilities {
  std::string version;  // "7.2.22"
  std::string package;  // "Debian 1:7.2+dfsg-7+deb12u18+b3"
  bool sandbox = false;
};

Result<QemuCapabilities> ProbeQemu(const std::string& qemu_path, std::chrono::milliseconds timeout);

// ProbeQemu, reusing `cache_file` while the binary (path, inode, size, mtime)
// is unchanged. A cache that cannot be written is only logged.
Result<QemuCapabilities> ProbeQemuCached(const std::string& qemu_path, const std::string& cache_file,
                                         std::chrono::milliseconds timeout);

}  // namespace capsule::hypervisor
