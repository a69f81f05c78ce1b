// Every path under the tools root is opened with RESOLVE_IN_ROOT and
// O_NOFOLLOW (secure_path.h): the image is the tenant's, and a symlink it
// plants at /proc must not aim the guest's proc mount elsewhere.
#include "agent/engine/tools_root.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <span>
#include <string_view>

#include "agent/engine/rootfs.h"
#include "agent/engine/secure_path.h"

namespace capsule::engine {
namespace {

struct ToolsMount {
  const char* destination;
  const char* source;  // bind source, or the filesystem's source name
  const char* type;    // nullptr: recursive bind
  unsigned long flags;
  const char* data;
  uint64_t attr_set;  // then set on the whole mount tree (mount_setattr)
};

constexpr ToolsMount kProc = {"proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr, 0};
constexpr ToolsMount kTmp = {"tmp", "tmpfs", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m", 0};

// The guest's root: its /sys and /dev as they are.
constexpr ToolsMount kGuestRootMounts[] = {
    kProc,
    {"sys", "/sys", nullptr, MS_BIND | MS_REC, nullptr, 0},
    {"dev", "/dev", nullptr, MS_BIND | MS_REC, nullptr, 0},
    kTmp,
};

// As a container: /sys read-only, a /dev of its own (filled in below).
constexpr ToolsMount kConfinedMounts[] = {
    kProc,
    {"sys", "/sys", nullptr, MS_BIND | MS_REC, nullptr,
     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC},
    {"dev", "tmpfs", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k", 0},
    kTmp,
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

Status SetAttrRecursive(int fd, uint64_t attr_set, const std::string& what) {
  mount_attr attr{};
  attr.attr_set = attr_set;
  if (::mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) return ErrnoStatus(what);
  return Status::Ok();
}

// Returns whether it mounted (the image has the mount point).
Result<bool> Mount(int root_fd, const ToolsMount& m) {
  const std::string what = std::string("mount the guest's ") + m.source + " on /" + m.destination + " of the tools root";
  ASSIGN_OR_RETURN(UniqueFd target, ExistingDirectory(root_fd, m.destination));
  if (!target) return false;
  if (::mount(m.source, FdPath(target.get()).c_str(), m.type, m.flags, m.data) != 0) return ErrnoStatus(what);
  if (m.attr_set != 0) {
    // The fd still names the directory under the new mount: reopen.
    ASSIGN_OR_RETURN(UniqueFd mounted, OpenInRoot(root_fd, m.destination, O_PATH | O_NOFOLLOW));
    RETURN_IF_ERROR(SetAttrRecursive(mounted.get(), m.attr_set, what + " (read-only)"));
  }
  return true;
}

// The confined /dev: the default devices and a devpts instance of its own,
// so the command reaches neither the guest's devices nor other sessions'
// terminals.
Status FillDev(int root_fd) {
  ASSIGN_OR_RETURN(UniqueFd pts, MkdirAllInRoot(root_fd, "/dev/pts"));
  if (::mount("devpts", FdPath(pts.get()).c_str(), "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620") != 0)
    return ErrnoStatus("mount a devpts instance on /dev/pts of the tools root");
  RootfsPlan devices;
  devices.devices = DefaultDevices();
  return CreateDevices(root_fd, devices);
}

}  // namespace

Status EnterToolsRoot(const ToolsRootPlan& plan) {
  const std::string& rootfs = plan.rootfs;
  if (::mount(nullptr, "/", nullptr, MS_PRIVATE | MS_REC, nullptr) != 0) return ErrnoStatus("make / rprivate");
  if (::mount(rootfs.c_str(), rootfs.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return ErrnoStatus("bind tools root " + rootfs);
  UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return ErrnoStatus("open tools root " + rootfs);
  // Read-only with everything mounted below it (a bind remount would cover
  // the top mount only), before the guest's own /proc, /sys, /dev and /tmp
  // go on top with their own flags.
  RETURN_IF_ERROR(SetAttrRecursive(root.get(), MOUNT_ATTR_RDONLY, "make tools root " + rootfs + " read-only"));
  bool has_dev = false;
  for (const ToolsMount& m : plan.confined ? std::span(kConfinedMounts) : std::span(kGuestRootMounts)) {
    ASSIGN_OR_RETURN(bool mounted, Mount(root.get(), m));
    if (mounted && std::string_view(m.destination) == "dev") has_dev = true;
  }
  if (plan.confined) {
    // The masks below bind /dev/null; without a /dev of its own the command
    // could only see the tenant's.
    if (!has_dev) return FailedPrecondition("the tools root " + rootfs + " has no /dev directory");
    RETURN_IF_ERROR(FillDev(root.get()));
  }
  if (::fchdir(root.get()) != 0 || ::chroot(".") != 0 || ::chdir("/") != 0)
    return ErrnoStatus("enter tools root " + rootfs);
  if (!plan.confined) return Status::Ok();
  // Absolute paths now resolve in the tools root, where /proc is the guest's.
  for (const auto& p : plan.masked_paths) RETURN_IF_ERROR(MaskPath(p));
  for (const auto& p : ConfinedReadonlyPaths()) RETURN_IF_ERROR(ReadonlyPath(p));
  for (const auto& p : plan.readonly_paths) {
    if (std::ranges::find(ConfinedReadonlyPaths(), p) == ConfinedReadonlyPaths().end())
      RETURN_IF_ERROR(ReadonlyPath(p));
  }
  return Status::Ok();
}

}  // namespace capsule::engine
