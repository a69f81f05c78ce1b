// The share dir's own shared mount: bind, make-private (leave the parent's
// peer group, so our submounts do not spread to every namespace that holds
// a copy of the parent), make-shared (new peer group that virtiofsd's
// namespace becomes a slave of).
#include "runtime/virtiofs/share_mount.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <utility>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"

namespace capsule::virtiofs {
namespace {
const log::Logger kLog("virtiofs");
}  // namespace

bool IsMountPoint(const std::string& path) {
  struct statx stx{};
  if (::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) != 0) return false;
  return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

Result<SharedMount> SharedMount::Create(const std::string& dir) {
  RETURN_IF_ERROR(MkdirAll(dir, 0750));
  if (IsMountPoint(dir)) return FailedPrecondition("share dir " + dir + " is already a mount point (left over?)");
  if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0) return ErrnoStatus("bind-mount " + dir + " onto itself");
  SharedMount m(dir);  // from here on, destruction unmounts
  if (::mount(nullptr, dir.c_str(), nullptr, MS_PRIVATE, nullptr) != 0) return ErrnoStatus("make " + dir + " private");
  if (::mount(nullptr, dir.c_str(), nullptr, MS_SHARED, nullptr) != 0) return ErrnoStatus("make " + dir + " shared");
  return m;
}

Result<SharedMount> SharedMount::Adopt(const std::string& dir) {
  if (!IsMountPoint(dir)) return NotFound("share dir " + dir + " is not mounted");
  return SharedMount(dir);
}

SharedMount::SharedMount(SharedMount&& other) noexcept : dir_(std::exchange(other.dir_, {})) {}

SharedMount& SharedMount::operator=(SharedMount&& other) noexcept {
  if (this != &other) {
    (void)Release();
    dir_ = std::exchange(other.dir_, {});
  }
  return *this;
}

SharedMount::~SharedMount() {
  Status st = Release();
  if (!st.ok()) kLog.Error("release share mount: {}", st.ToString());
}

Status SharedMount::Release() {
  if (dir_.empty()) return Status::Ok();
  std::string dir = std::exchange(dir_, {});
  if (::umount2(dir.c_str(), UMOUNT_NOFOLLOW) != 0) {
    if (errno != EBUSY) return ErrnoStatus("unmount share " + dir);
    // Container rootfs still mounted below: detach the whole subtree from
    // this namespace rather than leave the share pinned.
    kLog.Warn("share {} still has mounts below it; detaching them lazily", dir);
    if (::umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) return ErrnoStatus("detach share " + dir);
  }
  return RemoveAll(dir).WithContext("remove share dir");
}

}  // namespace capsule::virtiofs
