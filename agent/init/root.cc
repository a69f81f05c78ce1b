// Reads /proc/self/mountinfo to see whether "/" has a parent mount: the
// rootfs mount is its own parent (mount id == parent id), a mount on top of
// it is not. /proc is mounted for the check and unmounted again so the new
// root starts without stale mounts.
#include "agent/init/root.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/mount_table.h"

namespace capsule::agent::init {
namespace {

const log::Logger kRootLog("init");
constexpr const char* kStaging = "/.capsule-root";

// Mount id and parent id of the mount at "/" (the last one listed, since
// later mounts over "/" hide earlier ones).
bool RootHasParent(const std::string& mountinfo) {
  bool has_parent = false;
  for (const MountEntry& m : ParseMountInfo(mountinfo))
    if (m.mount_point == "/") has_parent = m.id != m.parent_id;
  return has_parent;
}

}  // namespace

bool RootIsInitramfs() {
  bool mounted_proc = false;
  if (::access("/proc/self/mountinfo", R_OK) != 0) {
    ::mkdir("/proc", 0555);
    mounted_proc = ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0;
  }
  auto info = ReadFile("/proc/self/mountinfo");
  if (mounted_proc) ::umount2("/proc", MNT_DETACH);
  return info.ok() && !RootHasParent(*info);
}

Status MakeRootPivotable() {
  if (!RootIsInitramfs()) return Status::Ok();
  if (::mkdir(kStaging, 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + std::string(kStaging));
  if (::mount("/", kStaging, nullptr, MS_BIND, nullptr) != 0) return ErrnoStatus("bind / on " + std::string(kStaging));
  if (::chdir(kStaging) != 0) return ErrnoStatus("chdir " + std::string(kStaging));
  if (::mount(".", "/", nullptr, MS_MOVE, nullptr) != 0) return ErrnoStatus("move the root bind mount onto /");
  if (::chroot(".") != 0) return ErrnoStatus("chroot into the moved root");
  if (::chdir("/") != 0) return ErrnoStatus("chdir / in the new root");
  // The staging directory is visible again (same filesystem) and now empty.
  if (::rmdir(kStaging) != 0) kRootLog.Warn("rmdir {}: {}", kStaging, ErrnoStatus("rmdir").message());
  kRootLog.Info("root moved off the initramfs rootfs (bind mount), pivot_root works for containers");
  return Status::Ok();
}

}  // namespace capsule::agent::init
