// Reading a mount namespace's table (/proc/self/mountinfo): its entries,
// what is mounted under a directory, and detaching all of it. The one
// mountinfo reader: the shim's `delete` clean-up after a dead shim, the
// pool's cgroup hierarchies, the agent's root and container rootfs set-up,
// its release of a removed container's share, and the tests' leak checks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

// One line of mountinfo (proc(5)), paths unescaped ("\040" is a space).
struct MountEntry {
  int id = 0;
  int parent_id = 0;
  std::string root;         // the mounted tree's root within its filesystem
  std::string mount_point;
  std::string options;      // per-mount: "rw,nosuid,relatime"
  std::string fstype;       // "cgroup", "cgroup2", "overlay", ...
  std::string source;
  std::string super_options;  // per-superblock: "rw,memory"
};

// Every well-formed line of `text`, in mount order; malformed lines are
// skipped. An empty source (two spaces in a row) is read as "".
std::vector<MountEntry> ParseMountInfo(std::string_view text);
// This process's mount namespace.
Result<std::vector<MountEntry>> ReadMountTable();

// Mount points at or strictly below `dir`, deepest first.
Result<std::vector<std::string>> MountsUnder(const std::string& dir, bool include_dir = false);

// Detaches (MNT_DETACH) every mount point strictly below `dir`, deepest
// first, so nothing stays pinned. The first failure is returned after
// trying all of them.
Status UnmountTree(const std::string& dir);

}  // namespace capsule
