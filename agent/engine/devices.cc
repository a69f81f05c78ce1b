// /dev contents: the spec's default devices plus linux.devices, created with
// mknod (bind-mounted from the agent's /dev when mknod is refused), and the
// /proc/self/fd symlinks (fd, stdin, stdout, stderr, core) plus /dev/ptmx.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent/engine/rootfs.h"
#include "agent/engine/secure_path.h"

namespace capsule::engine {
namespace {

oci::LinuxDevice CharDevice(const char* path, int64_t major, int64_t minor) {
  oci::LinuxDevice d;
  d.path = path;
  d.type = "c";
  d.major = major;
  d.minor = minor;
  d.file_mode = 0666;
  d.uid = 0;
  d.gid = 0;
  return d;
}

mode_t DeviceType(const std::string& type) {
  if (type == "b") return S_IFBLK;
  if (type == "p") return S_IFIFO;
  return S_IFCHR;  // "c" and "u"
}

// Bind-mounts the agent's node when the filesystem refuses mknod.
Status BindDevice(int dir_fd, const std::string& name, const oci::LinuxDevice& d) {
  UniqueFd f(::openat(dir_fd, name.c_str(), O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!f) return ErrnoStatus("create bind target for " + d.path);
  if (::mount(d.path.c_str(), FdPath(f.get()).c_str(), nullptr, MS_BIND, nullptr) != 0)
    return ErrnoStatus("bind " + d.path + " into the container");
  return Status::Ok();
}

Status CreateDevice(int root_fd, const oci::LinuxDevice& d) {
  auto [parent, name] = SplitParent(d.path);
  // An O_PATH directory fd is a valid dirfd for the *at() calls below.
  ASSIGN_OR_RETURN(UniqueFd dirfd, MkdirAllInRoot(root_fd, parent));
  ::unlinkat(dirfd.get(), name.c_str(), 0);
  const mode_t perm = d.file_mode.value_or(0666) & 07777;
  const dev_t dev = makedev(static_cast<unsigned>(d.major), static_cast<unsigned>(d.minor));
  if (::mknodat(dirfd.get(), name.c_str(), DeviceType(d.type) | perm, dev) != 0) {
    if (errno != EPERM) return ErrnoStatus("mknod " + d.path);
    return BindDevice(dirfd.get(), name, d);
  }
  if (::fchmodat(dirfd.get(), name.c_str(), perm, 0) != 0) return ErrnoStatus("chmod " + d.path);
  if (::fchownat(dirfd.get(), name.c_str(), d.uid.value_or(0), d.gid.value_or(0), AT_SYMLINK_NOFOLLOW) != 0)
    return ErrnoStatus("chown " + d.path);
  return Status::Ok();
}

Status Symlink(int dev_fd, const char* target, const char* name) {
  if (::symlinkat(target, dev_fd, name) != 0 && errno != EEXIST)
    return ErrnoStatus(std::string("symlink /dev/") + name + " -> " + target);
  return Status::Ok();
}

}  // namespace

std::vector<oci::LinuxDevice> DefaultDevices() {
  // Numbers from the kernel's Documentation/admin-guide/devices.txt.
  return {CharDevice("/dev/null", 1, 3),    CharDevice("/dev/zero", 1, 5),
          CharDevice("/dev/full", 1, 7),    CharDevice("/dev/random", 1, 8),
          CharDevice("/dev/urandom", 1, 9), CharDevice("/dev/tty", 5, 0)};
}

Status CreateDevices(int root_fd, const RootfsPlan& plan) {
  for (const auto& d : plan.devices) RETURN_IF_ERROR(CreateDevice(root_fd, d));
  ASSIGN_OR_RETURN(UniqueFd dev, MkdirAllInRoot(root_fd, "/dev"));
  RETURN_IF_ERROR(Symlink(dev.get(), "/proc/self/fd", "fd"));
  RETURN_IF_ERROR(Symlink(dev.get(), "/proc/self/fd/0", "stdin"));
  RETURN_IF_ERROR(Symlink(dev.get(), "/proc/self/fd/1", "stdout"));
  RETURN_IF_ERROR(Symlink(dev.get(), "/proc/self/fd/2", "stderr"));
  if (::access("/proc/kcore", F_OK) == 0) RETURN_IF_ERROR(Symlink(dev.get(), "/proc/kcore", "core"));
  // The container's devpts instance has its own ptmx; point /dev/ptmx at it.
  struct stat st{};
  if (::fstatat(dev.get(), "pts/ptmx", &st, AT_SYMLINK_NOFOLLOW) == 0) {
    ::unlinkat(dev.get(), "ptmx", 0);
    RETURN_IF_ERROR(Symlink(dev.get(), "pts/ptmx", "ptmx"));
  }
  return Status::Ok();
}

}  // namespace capsule::engine
