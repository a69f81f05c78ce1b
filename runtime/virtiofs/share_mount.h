// SharedMount: a VM's share dir bind-mounted onto itself and made a shared
// mount (its own peer group). virtiofsd's namespace sandbox copies the
// mount table and turns it into slaves, so mounts made under the share on
// the host *after* virtiofsd started (container rootfs) propagate into the
// daemon's view only when the share is a shared mount. Host mounts are
// private on many hosts (this build machine: no "shared:" tag anywhere),
// hence the explicit bind.
#pragma once

#include <string>

#include "runtime/common/status.h"

namespace capsule::virtiofs {

class SharedMount {
 public:
  // mkdir -p `dir`, bind it onto itself, make it private then shared.
  // FAILED_PRECONDITION if `dir` is already a mount point (a leftover).
  static Result<SharedMount> Create(const std::string& dir);
  // Takes over an existing share mount (adoption); NOT_FOUND if `dir` is not
  // a mount point.
  static Result<SharedMount> Adopt(const std::string& dir);

  SharedMount() = default;
  SharedMount(SharedMount&& other) noexcept;
  SharedMount& operator=(SharedMount&& other) noexcept;
  SharedMount(const SharedMount&) = delete;
  SharedMount& operator=(const SharedMount&) = delete;
  ~SharedMount();  // Release(), errors logged

  const std::string& dir() const { return dir_; }
  bool active() const { return !dir_.empty(); }
  // Unmounts the share (detaching lazily whatever is still mounted below it,
  // so nothing stays pinned), then removes the directory tree, never
  // crossing a mount point.
  Status Release();
  // Forgets the mount without unmounting it (detach for adoption).
  void Leave() { dir_.clear(); }

 private:
  explicit SharedMount(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// statx(STATX_ATTR_MOUNT_ROOT): true also for same-filesystem bind mounts.
bool IsMountPoint(const std::string& path);

}  // namespace capsule::virtiofs
