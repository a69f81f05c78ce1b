// A filesystem the agent mounts for the sandbox or a container: the
// virtio-fs share, a tmpfs, a bind mount of a guest path, a read-only erofs
// image on a hot-plugged SCSI disk (the dense device set's rootfs and
// mounts, which need no shared RAM), an overlay that makes such an image
// writable in the guest (its upper layer on a tmpfs storage), or a local
// volume: a directory in guest memory that the pod's containers share for the
// pod's life (the dense device set's emptyDir). A mounted storage is an RAII
// object: destroying it unmounts, so a failure half way through a request
// leaves nothing mounted; a local volume is made, not mounted, and stays.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/common/mount_options.h"
#include "runtime/common/status.h"

namespace capsule::agent::storage {

// Drivers (Storage.driver in agent.proto).
inline constexpr std::string_view kDriverVirtioFs = "virtiofs";
inline constexpr std::string_view kDriverTmpfs = "tmpfs";
inline constexpr std::string_view kDriverBind = "bind";
inline constexpr std::string_view kDriverBlock = "blk";
inline constexpr std::string_view kDriverOverlay = "overlay";
inline constexpr std::string_view kDriverLocal = "local";
// A local volume's name: a Kubernetes volume name fits (a DNS label).
inline constexpr size_t kLocalVolumeNameMax = 63;
// How long a blk storage waits for its disk to show up after the hot-plug.
inline constexpr std::chrono::milliseconds kBlockDeviceWait{10000};

struct StorageSpec {
  std::string driver;
  // virtiofs: the tag; bind: a guest path; tmpfs: a name; blk: the disk's
  // serial; overlay: the lower directory (a guest path); local: the
  // volume's name. An overlay's options name its upperdir= and workdir=
  // (guest paths, made if missing).
  std::string source;
  std::string fstype;       // empty, or the driver's own type
  std::vector<std::string> options;
  std::string mount_point;  // absolute guest path, created when missing

  bool operator==(const StorageSpec&) const = default;
};

// Kernel modules the storages need loaded first: a blk storage's erofs
// ships with the image and is loaded on first use (a dense clone has no host
// module tree to ask), after the crc32c driver its libcrc32c dependency
// asks for (a softdep). Empty when none is needed.
std::vector<std::string> ModulesFor(const std::vector<StorageSpec>& specs);

// Everything that can be checked without touching the system. The message
// names the field ("storage[1].mount_point ...") when `field` is given.
Status ValidateStorage(const StorageSpec& spec, std::string_view field = "storage");

class MountedStorage {
 public:
  // Validates, creates the mount point, mounts, applies propagation. A
  // local volume's directory is made (mode 0777, as the kubelet makes an
  // emptyDir) or found, and is not removed again: it holds the pod's data
  // until the VM ends, whichever container goes first.
  static Result<MountedStorage> Mount(const StorageSpec& spec);

  MountedStorage(MountedStorage&& other) noexcept;
  MountedStorage& operator=(MountedStorage&& other) noexcept;
  MountedStorage(const MountedStorage&) = delete;
  MountedStorage& operator=(const MountedStorage&) = delete;
  ~MountedStorage();

  // umount2; a busy mount is detached (MNT_DETACH) with a warning so the
  // teardown always finishes. Idempotent.
  Status Unmount();

  const std::string& mount_point() const { return mount_point_; }
  bool mounted() const { return mounted_; }

 private:
  MountedStorage(std::string mount_point, bool mounted) : mount_point_(std::move(mount_point)), mounted_(mounted) {}

  std::string mount_point_;
  bool mounted_ = false;
};

}  // namespace capsule::agent::storage
