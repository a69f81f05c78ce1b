// The host tree and the guest's read-only view of it (see share_mount.h).
#include "runtime/virtiofs/share_mount.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <utility>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"

namespace capsule::virtiofs {
namespace {
const log::Logger kShareMountLog("virtiofs");
}  // namespace

bool IsMountPoint(const std::string& path) {
  struct statx stx{};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0) return false;
  return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

Result<SharedMount> SharedMount::Create(const std::string& host_dir, const std::string& share_dir) {
  RETURN_IF_ERROR(MkdirAll(host_dir, 0700));
  RETURN_IF_ERROR(MkdirAll(share_dir, 0750));
  for (const std::string* d : {&host_dir, &share_dir}) {
    if (IsMountPoint(*d)) return FailedPrecondition("share dir " + *d + " is already a mount point (left over?)");
  }
  if (::mount(host_dir.c_str(), host_dir.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return ErrnoStatus("bind-mount " + host_dir + " onto itself");
  SharedMount m(host_dir, "");  // from here on, destruction unmounts
  // Private first: leave the parent's peer group, so our submounts do not
  // spread to every namespace that holds a copy of the parent.
  if (::mount(nullptr, host_dir.c_str(), nullptr, MS_PRIVATE, nullptr) != 0)
    return ErrnoStatus("make " + host_dir + " private");
  if (::mount(nullptr, host_dir.c_str(), nullptr, MS_SHARED, nullptr) != 0)
    return ErrnoStatus("make " + host_dir + " shared");
  if (::mount(host_dir.c_str(), share_dir.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return ErrnoStatus("bind-mount " + host_dir + " onto " + share_dir);
  m.share_dir_ = share_dir;
  if (::mount(nullptr, share_dir.c_str(), nullptr, MS_SLAVE, nullptr) != 0)
    return ErrnoStatus("make " + share_dir + " a slave of " + host_dir);
  if (::mount(nullptr, share_dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
              nullptr) != 0)
    return ErrnoStatus("remount " + share_dir + " read-only, nosuid, nodev");
  return m;
}

Status SharedMount::BindReadOnly(const std::string& source, const std::string& name) {
  if (host_dir_.empty()) return FailedPrecondition("share: no host tree to bind " + source + " into");
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    return InvalidArgument("share: '" + name + "' is not one path component");
  struct stat st {};
  if (::stat(source.c_str(), &st) != 0) return ErrnoStatus("share: " + source);
  if (!S_ISDIR(st.st_mode)) return InvalidArgument("share: " + source + " is not a directory");
  const std::string target = host_dir_ + "/" + name;
  RETURN_IF_ERROR(MkdirAll(target, 0755));
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return ErrnoStatus("bind-mount " + source + " onto " + target);
  if (::mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    return ErrnoStatus("remount " + target + " read-only, nosuid, nodev");
  return Status::Ok();
}

Result<SharedMount> SharedMount::Adopt(const std::string& host_dir, const std::string& share_dir) {
  const bool host = IsMountPoint(host_dir), share = IsMountPoint(share_dir);
  if (!host && !share) return NotFound("share dirs " + host_dir + " and " + share_dir + " are not mounted");
  return SharedMount(host ? host_dir : "", share ? share_dir : "");
}

SharedMount::SharedMount(SharedMount&& other) noexcept
    : host_dir_(std::exchange(other.host_dir_, {})), share_dir_(std::exchange(other.share_dir_, {})) {}

SharedMount& SharedMount::operator=(SharedMount&& other) noexcept {
  if (this != &other) {
    (void)Release();
    host_dir_ = std::exchange(other.host_dir_, {});
    share_dir_ = std::exchange(other.share_dir_, {});
  }
  return *this;
}

SharedMount::~SharedMount() {
  Status st = Release();
  if (!st.ok()) kShareMountLog.Error("release share mount: {}", st.ToString());
}

namespace {

// Unmounts `dir` (lazily when mounts below it keep it busy) and removes it.
Status UnmountAndRemove(const std::string& dir) {
  if (::umount2(dir.c_str(), UMOUNT_NOFOLLOW) != 0) {
    if (errno != EBUSY) return ErrnoStatus("unmount share " + dir);
    // Container rootfs still mounted below: detach the whole subtree from
    // this namespace rather than leave the share pinned.
    kShareMountLog.Warn("share {} still has mounts below it; detaching them lazily", dir);
    if (::umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) return ErrnoStatus("detach share " + dir);
  }
  return RemoveAll(dir).WithContext("remove share dir");
}

}  // namespace

Status SharedMount::Release() {
  Status first;
  // The guest's view first: it is a slave of the host tree.
  for (std::string* d : {&share_dir_, &host_dir_}) {
    if (d->empty()) continue;
    Status st = UnmountAndRemove(std::exchange(*d, {}));
    if (!st.ok() && first.ok()) first = std::move(st);
  }
  return first;
}

}  // namespace capsule::virtiofs
