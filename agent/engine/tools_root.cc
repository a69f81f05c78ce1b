// Every path under the tools root is opened with RESOLVE_IN_ROOT and
// O_NOFOLLOW (secure_path.h): the image is the tenant's, and a symlink it
// plants at /proc must not aim the guest's proc mount elsewhere.
#include "agent/engine/tools_root.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/engine/mount_options.h"
#include "agent/engine/secure_path.h"

namespace capsule::engine {
namespace {

struct ToolsMount {
  const char* destination;
  const char* source;  // bind source, or the filesystem's source name
  const char* type;    // nullptr: recursive bind
  unsigned long flags;
  const char* data;
};

constexpr ToolsMount kToolsMounts[] = {
    {"proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr},
    {"sys", "/sys", nullptr, MS_BIND | MS_REC, nullptr},
    {"dev", "/dev", nullptr, MS_BIND | MS_REC, nullptr},
    {"tmp", "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m"},
};

// An O_PATH fd of the directory at `name` under the root; nullopt-like
// empty fd when the image has none (or something else there).
Result<UniqueFd> ExistingDirectory(int root_fd, const char* name) {
  auto fd = OpenInRoot(root_fd, name, O_PATH | O_NOFOLLOW);
  if (!fd.ok()) {
    if (fd.status().code() == Code::kNotFound) return UniqueFd();
    return fd.status();
  }
  struct stat st{};
  if (::fstat(fd->get(), &st) != 0) return ErrnoStatus(std::string("stat /") + name + " of the tools root");
  if (!S_ISDIR(st.st_mode)) return UniqueFd();
  return std::move(*fd);
}

}  // namespace

Status EnterToolsRoot(const std::string& rootfs) {
  if (::mount(nullptr, "/", nullptr, MS_PRIVATE | MS_REC, nullptr) != 0) return ErrnoStatus("make / rprivate");
  if (::mount(rootfs.c_str(), rootfs.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return ErrnoStatus("bind tools root " + rootfs);
  UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return ErrnoStatus("open tools root " + rootfs);
  // Read-only with everything mounted below it (mount_setattr; a bind
  // remount would cover the top mount only), before the guest's own
  // /proc, /sys, /dev and /tmp go on top with their own flags.
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(root.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) {
    if (errno != ENOSYS) return ErrnoStatus("make tools root " + rootfs + " read-only");
    const unsigned long ro = MS_BIND | MS_REMOUNT | MS_RDONLY | PreservedFlags(rootfs);
    if (::mount(nullptr, FdPath(root.get()).c_str(), nullptr, ro, nullptr) != 0)
      return ErrnoStatus("remount tools root " + rootfs + " read-only");
  }
  for (const ToolsMount& m : kToolsMounts) {
    ASSIGN_OR_RETURN(UniqueFd target, ExistingDirectory(root.get(), m.destination));
    if (!target) continue;
    if (::mount(m.source, FdPath(target.get()).c_str(), m.type, m.flags, m.data) != 0)
      return ErrnoStatus(std::string("mount the guest's ") + m.source + " on /" + m.destination + " of the tools root");
  }
  if (::fchdir(root.get()) != 0 || ::chroot(".") != 0 || ::chdir("/") != 0)
    return ErrnoStatus("enter tools root " + rootfs);
  return Status::Ok();
}

}  // namespace capsule::engine
