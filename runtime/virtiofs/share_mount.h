// SharedMount: a VM's share as two mounts of one directory tree, so that
// the host never makes a path operation where the guest can write:
//   <vm>/mounts/  the host's tree (0700, never exported). The shim makes its
//                 directories and mounts (container rootfs, volumes) here.
//                 Bound onto itself and made a shared mount (its own peer
//                 group), so mounts below it propagate.
//   <vm>/shared/  what virtiofsd exports: a bind of mounts/ made a slave of
//                 it (mounts made under mounts/ appear here, nothing flows
//                 back) and read-only, nosuid, nodev. The guest can neither
//                 create nor rename anything in it, so it cannot swap a path
//                 component for a symlink between the shim's mkdir and its
//                 mount (Kata's CVE-2020-2026); what it may write is inside
//                 the mounts themselves (a rootfs' overlay, an rw volume),
//                 where the host does no path operations.
// virtiofsd's namespace sandbox copies the mount table and turns it into
// slaves, so late mounts reach its view only through this propagation. Host
// mounts are private on many hosts (this build machine: no "shared:" tag
// anywhere), hence the explicit binds.
#pragma once

#include <string>

#include "runtime/common/status.h"

namespace capsule::virtiofs {

class SharedMount {
 public:
  // mkdir both, bind `host_dir` onto itself (private, then shared), bind it
  // onto `share_dir` (slave, read-only, nosuid, nodev). FAILED_PRECONDITION
  // if either is already a mount point (a leftover). Nothing is left on
  // failure.
  static Result<SharedMount> Create(const std::string& host_dir, const std::string& share_dir);
  // Takes over whichever of the two is mounted (adoption, or clean-up of a
  // half-made share); NOT_FOUND if neither is.
  static Result<SharedMount> Adopt(const std::string& host_dir, const std::string& share_dir);

  SharedMount() = default;
  SharedMount(SharedMount&& other) noexcept;
  SharedMount& operator=(SharedMount&& other) noexcept;
  SharedMount(const SharedMount&) = delete;
  SharedMount& operator=(const SharedMount&) = delete;
  ~SharedMount();  // Release(), errors logged

  const std::string& host_dir() const { return host_dir_; }
  const std::string& share_dir() const { return share_dir_; }
  bool active() const { return !share_dir_.empty() || !host_dir_.empty(); }
  // Unmounts the guest's view, then the host tree (detaching lazily whatever
  // is still mounted below them, so nothing stays pinned), then removes both
  // directory trees, never crossing a mount point.
  Status Release();
  // Binds the host directory `source` read-only (and nosuid, nodev) at
  // `name` (one path component) in the host tree, so the guest sees it at
  // the share's top. Released with the share. NOT_FOUND names `source`.
  Status BindReadOnly(const std::string& source, const std::string& name);
  // Forgets the mounts without unmounting them (detach for adoption).
  void Leave() {
    host_dir_.clear();
    share_dir_.clear();
  }

 private:
  SharedMount(std::string host_dir, std::string share_dir)
      : host_dir_(std::move(host_dir)), share_dir_(std::move(share_dir)) {}
  std::string host_dir_;   // "" when there is none to release
  std::string share_dir_;
};

// statx(STATX_ATTR_MOUNT_ROOT): true also for same-filesystem bind mounts.
bool IsMountPoint(const std::string& path);

}  // namespace capsule::virtiofs
