// LinuxMounter and ScopedMount. Option words follow containerd's
// mount_linux.go table so a snapshotter's mounts mean the same here.
#include "shim/mount/mounter.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "runtime/common/file_util.h"
#include "runtime/common/backoff.h"
#include "runtime/common/logging.h"
#include "runtime/common/mount_options.h"
#include "runtime/common/unique_fd.h"

namespace capsule::shim::mount {
namespace {

const log::Logger kMounterLog("shim.mount");

// How long an unmount waits for a busy mount to be released, and how often
// it tries again meanwhile.
constexpr std::chrono::milliseconds kBusyUnmountWait{500};
constexpr std::chrono::milliseconds kBusyUnmountRetry{10};

std::string Describe(const MountSpec& s) {
  return "mount " + (s.type.empty() ? std::string("bind") : s.type) + " " + s.source + " on " + s.target;
}

}  // namespace

Status LinuxMounter::Mount(const MountSpec& spec) {
  auto parsed = ParseMountOptions(spec.type, spec.options);
  if (!parsed.ok()) {
    Status st = parsed.status().WithContext(Describe(spec));
    // Overlay's lowerdir= lists every layer: how its options outgrow a page.
    if (spec.type == "overlay") return InvalidArgument(st.message() + " (an image with fewer layers is needed)");
    return st;
  }
  const MountOptions& p = *parsed;
  const bool bind = (p.flags & MS_BIND) != 0;
  const unsigned long first = bind ? (p.flags & (MS_BIND | MS_REC)) : p.flags;
  const char* type = bind ? "" : spec.type.c_str();
  if (::mount(spec.source.c_str(), spec.target.c_str(), type, first, p.data.empty() ? nullptr : p.data.c_str()) != 0)
    return ErrnoStatus(Describe(spec));
  // A bind mount ignores most flags on the first call: apply them by remount.
  const unsigned long rest = p.flags & ~(MS_BIND | MS_REC | MS_REMOUNT);
  if (bind && rest != 0 &&
      ::mount("", spec.target.c_str(), "", MS_REMOUNT | MS_BIND | rest, nullptr) != 0) {
    Status st = ErrnoStatus("remount " + spec.target + " with its bind options");
    ::umount2(spec.target.c_str(), MNT_DETACH);
    return st;
  }
  for (unsigned long propagation : p.propagation) {
    if (::mount("", spec.target.c_str(), "", propagation, nullptr) != 0) {
      Status st = ErrnoStatus("set propagation of " + spec.target);
      ::umount2(spec.target.c_str(), MNT_DETACH);
      return st;
    }
  }
  return Status::Ok();
}

// A mount under a VM's share is busy while virtiofsd holds an fd on an
// inode the guest still references; the agent releases the container's
// inodes when it removes the container (agent/storage/share_release.h),
// and virtiofsd closes its fds when the guest's FORGETs arrive, a moment
// later. Only a guest that keeps them (a hostile or wedged one) makes the
// unmount wait this long and then detach lazily, which is still safe: the
// mount leaves every namespace at once and its last reference goes with
// virtiofsd's fd, at the latest when the VM stops.
Status LinuxMounter::Unmount(const std::string& target) {
  int err = 0;  // of the last try; anything but EBUSY ends the wait
  const bool settled = WaitUntil(
      [&] {
        err = ::umount2(target.c_str(), UMOUNT_NOFOLLOW) == 0 ? 0 : errno;
        return err != EBUSY;
      },
      kBusyUnmountWait, {kBusyUnmountRetry, kBusyUnmountRetry});
  if (settled) {
    if (err == 0 || err == EINVAL || err == ENOENT) return Status::Ok();  // not (or no longer) mounted
    return ErrnoStatus("umount " + target, err);
  }
  kMounterLog.Warn("umount {}: still busy after {} ms (the guest has not released it); detaching it lazily", target,
                   kBusyUnmountWait.count());
  if (::umount2(target.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) return ErrnoStatus("detach " + target);
  return Status::Ok();
}

ScopedMount::ScopedMount(ScopedMount&& other) noexcept
    : mounter_(std::exchange(other.mounter_, nullptr)), target_(std::move(other.target_)) {
  other.target_.clear();
}

ScopedMount& ScopedMount::operator=(ScopedMount&& other) noexcept {
  if (this != &other) {
    (void)Unmount();
    mounter_ = std::exchange(other.mounter_, nullptr);
    target_ = std::exchange(other.target_, std::string());
  }
  return *this;
}

ScopedMount::~ScopedMount() {
  if (Status st = Unmount(); !st.ok()) kMounterLog.Error("{}", st.ToString());
}

Status MakeMountTarget(const std::string& target, bool directory) {
  if (directory) return MkdirAll(target, 0755);
  RETURN_IF_ERROR(MkdirAll(target.substr(0, target.rfind('/')), 0755));
  UniqueFd fd(::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return ErrnoStatus("create bind target " + target);
  return Status::Ok();
}

Result<ScopedMount> ScopedMount::Make(Mounter* mounter, const MountSpec& spec) {
  RETURN_IF_ERROR(mounter->Mount(spec));
  return ScopedMount(mounter, spec.target);
}

Status ScopedMount::Unmount() {
  if (!active()) return Status::Ok();
  Status st = mounter_->Unmount(target_);
  if (st.ok()) {
    mounter_ = nullptr;
    target_.clear();
  }
  return st;
}

std::string ScopedMount::Release() {
  mounter_ = nullptr;
  return std::exchange(target_, std::string());
}

}  // namespace capsule::shim::mount
