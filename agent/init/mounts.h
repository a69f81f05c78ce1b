// The API filesystems PID 1 mounts before anything else runs: /proc, /sys,
// /dev (devtmpfs), /dev/pts, /dev/shm, /run, /tmp and cgroup2.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::agent::init {

struct EarlyMount {
  const char* source;
  const char* target;
  const char* fstype;
  unsigned long flags;
  const char* data;
  // Options to mount with instead when the kernel refuses `data` (EINVAL):
  // an option newer than the guest kernel. nullptr: none.
  const char* older_kernel_data = nullptr;
};

// The kernel's options for the filesystem mounted at `mount_point` (its
// superblock's, as this process's mountinfo shows them: "rw,nsdelegate").
Result<std::string> SuperOptionsOf(const std::string& mount_point);

// In mount order; /sys/fs/cgroup comes last and only with `cgroups`.
std::vector<EarlyMount> EarlyMounts(bool cgroups);

// Mounts one, creating its directory; a target that already holds a
// filesystem of that type is left alone.
Status MountOne(const EarlyMount& m);

// Mounts each one, creating its directory; a target that already holds a
// filesystem of that type is left alone. Stops at the first failure.
Status MountEarlyFilesystems(bool cgroups);

// /dev/fd, /dev/stdin, /dev/stdout, /dev/stderr (devtmpfs does not make them).
Status CreateDevSymlinks();

}  // namespace capsule::agent::init
