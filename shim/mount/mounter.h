// Mounter: the host mounts the shim makes for a container — containerd's
// rootfs mounts (overlay, bind) and CRI's bind mounts, all placed under the
// VM's virtio-fs share — behind an interface so the service layer is tested
// with a fake; LinuxMounter does mount(2). ScopedMount undoes one mount on
// destruction, so no failure path leaves a mount behind.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::shim::mount {

// containerd's types.Mount, plus the target.
struct MountSpec {
  std::string type;    // "overlay", "bind", "tmpfs", ...
  std::string source;
  std::string target;
  std::vector<std::string> options;  // fstab words: "ro", "rbind", "lowerdir=..."
};

class Mounter {
 public:
  virtual ~Mounter() = default;
  // The target must exist (a dir, or a file for a file bind mount).
  virtual Status Mount(const MountSpec& spec) = 0;
  // Unmounts `target`; a busy mount is detached lazily (logged).
  virtual Status Unmount(const std::string& target) = 0;
};
using MounterPtr = std::unique_ptr<Mounter>;

// mount(2) with containerd's option semantics (mount/mount_linux.go):
// flag words become MS_* flags, "bind"/"rbind" make a bind mount (with a
// read-only remount when asked), propagation words a second call, the rest
// the filesystem's data string (at most one page: INVALID_ARGUMENT beyond).
class LinuxMounter : public Mounter {
 public:
  Status Mount(const MountSpec& spec) override;
  Status Unmount(const std::string& target) override;
};

// A bind mount's target: the directory (mkdir -p), or for a file bind an
// empty file (its parent made), never following a link at `target`.
Status MakeMountTarget(const std::string& target, bool directory);

// One mount owned: unmounted on destruction unless Release()d.
class ScopedMount {
 public:
  ScopedMount() = default;
  ScopedMount(Mounter* mounter, std::string target) : mounter_(mounter), target_(std::move(target)) {}
  ScopedMount(ScopedMount&& other) noexcept;
  ScopedMount& operator=(ScopedMount&& other) noexcept;
  ScopedMount(const ScopedMount&) = delete;
  ScopedMount& operator=(const ScopedMount&) = delete;
  ~ScopedMount();

  // Mounts `spec` and returns its owner.
  static Result<ScopedMount> Make(Mounter* mounter, const MountSpec& spec);

  const std::string& target() const { return target_; }
  bool active() const { return mounter_ != nullptr && !target_.empty(); }
  // Unmounts now; idempotent.
  Status Unmount();
  // Forgets the mount without unmounting it.
  std::string Release();

 private:
  Mounter* mounter_ = nullptr;
  std::string target_;
};

}  // namespace capsule::shim::mount
