// OCI mount "options" -> mount(2) arguments: flags, propagation changes
// (applied as separate mount calls), and the fs-specific data string.
// Pure logic, shared by the rootfs setup in the container child.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::engine {

struct MountOptions {
  unsigned long flags = 0;               // MS_RDONLY, MS_NOSUID, ... (MS_BIND|MS_REC for rbind)
  std::vector<unsigned long> propagation;  // each one mount call: MS_PRIVATE|MS_REC, ...
  std::string data;                       // "mode=755,size=65536k"
  bool bind() const;
  // Flags that need a second MS_REMOUNT|MS_BIND call to stick on a bind
  // mount (the kernel ignores them on the first bind call).
  unsigned long bind_remount_flags() const;
};

// Known flag names set or clear flags; unknown ones go to `data` in order.
// `type` "bind" implies MS_BIND. Propagation names become propagation calls.
MountOptions ParseMountOptions(std::string_view type, const std::vector<std::string>& options);

// "rprivate" -> MS_PRIVATE|MS_REC; 0 for "" or an unknown name.
unsigned long PropagationFlags(std::string_view name);

// The flags of the mount at `path` that a bind remount must repeat to keep
// them (statvfs -> MS_NOSUID, MS_NODEV, ...); 0 when it cannot be read.
unsigned long PreservedFlags(const std::string& path);

}  // namespace capsule::engine
