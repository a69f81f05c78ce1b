// Rootfs planning (parent) and construction (container child). Mount
// targets are resolved inside the rootfs and mounted through
// /proc/self/fd/N; after pivot_root every path is the container's own.
#include "agent/engine/rootfs.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "agent/engine/secure_path.h"
#include "runtime/common/mount_table.h"

namespace capsule::engine {
namespace {

bool HasMountAt(const std::vector<MountPlan>& mounts, const std::string& dest) {
  return std::any_of(mounts.begin(), mounts.end(), [&](const MountPlan& m) { return m.destination == dest; });
}

Result<MountPlan> DefaultMount(const char* dest, const char* type, const std::vector<std::string>& options) {
  MountPlan m;
  m.field = std::string("default mount ") + dest;
  m.destination = dest;
  m.source = type;
  m.type = type;
  ASSIGN_OR_RETURN(m.options, ParseMountOptions(type, options));
  return m;
}

// The flags of the mount at `path` that a bind remount must repeat to keep
// them (statvfs -> MS_NOSUID, MS_NODEV, ...); 0 when it cannot be read.
unsigned long PreservedFlags(const std::string& path) {
  struct statvfs sv{};
  if (::statvfs(path.c_str(), &sv) != 0) return 0;
  unsigned long f = 0;
  if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
  return f;
}

Result<MountPlan> PlanMount(const oci::Mount& m, size_t index, bool cgroup2) {
  MountPlan p;
  p.field = "mounts[" + std::to_string(index) + "]";
  p.destination = m.destination;
  p.source = m.source;
  p.type = m.type;
  auto options = ParseMountOptions(m.type, m.options);
  if (!options.ok()) return options.status().WithContext(p.field + ".options");
  p.options = std::move(*options);
  if (p.options.bind()) {
    struct stat st{};
    if (::stat(m.source.c_str(), &st) != 0) return ErrnoStatus(p.field + ".source: stat " + m.source);
    p.directory = S_ISDIR(st.st_mode);
    return p;
  }
  if (p.type.empty()) return InvalidArgument(p.field + ".type: required for a mount that is not a bind mount");
  if (p.type == "cgroup" && cgroup2) {
    p.type = "cgroup2";  // v1 controller options make no sense on cgroup2
    p.options.data.clear();
  }
  if (p.source.empty()) p.source = p.type;
  return p;
}

Status CheckAbsolute(const std::vector<std::string>& paths, const std::string& field) {
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].empty() || paths[i][0] != '/')
      return InvalidArgument(field + "[" + std::to_string(i) + "]: must be an absolute path, got \"" + paths[i] + "\"");
  }
  return Status::Ok();
}

}  // namespace

Result<RootfsPlan> PlanRootfs(const oci::Spec& spec, const std::string& rootfs, const NamespacePlan& ns,
                              bool cgroup2) {
  RootfsPlan plan;
  struct stat st{};
  if (::stat(rootfs.c_str(), &st) != 0) return ErrnoStatus("root.path: stat " + rootfs);
  if (!S_ISDIR(st.st_mode)) return InvalidArgument("root.path: " + rootfs + " is not a directory");
  plan.rootfs = rootfs;
  plan.readonly = spec.root.readonly;
  plan.propagation = PropagationFlags(spec.linux.rootfs_propagation);
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    ASSIGN_OR_RETURN(MountPlan m, PlanMount(spec.mounts[i], i, cgroup2));
    if (m.destination == "/dev" && m.type == "tmpfs") plan.dev_is_tmpfs = true;
    plan.mounts.push_back(std::move(m));
  }
  if (plan.dev_is_tmpfs && !HasMountAt(plan.mounts, "/dev/pts")) {
    ASSIGN_OR_RETURN(MountPlan pts, DefaultMount("/dev/pts", "devpts", {"nosuid", "noexec", "newinstance",
                                                                         "ptmxmode=0666", "mode=0620", "gid=5"}));
    plan.mounts.push_back(std::move(pts));
  }
  if (plan.dev_is_tmpfs && !HasMountAt(plan.mounts, "/dev/shm")) {
    ASSIGN_OR_RETURN(MountPlan shm,
                     DefaultMount("/dev/shm", "tmpfs", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}));
    plan.mounts.push_back(std::move(shm));
  }
  plan.devices = DefaultDevices();
  for (const auto& d : spec.linux.devices) {
    std::erase_if(plan.devices, [&](const oci::LinuxDevice& x) { return x.path == d.path; });
    plan.devices.push_back(d);
  }
  RETURN_IF_ERROR(CheckAbsolute(spec.linux.masked_paths, "linux.maskedPaths"));
  RETURN_IF_ERROR(CheckAbsolute(spec.linux.readonly_paths, "linux.readonlyPaths"));
  plan.masked_paths = spec.linux.masked_paths;
  plan.readonly_paths = spec.linux.readonly_paths;
  for (const auto& [key, value] : spec.linux.sysctl) {
    if (key.empty() || key.find('/') != std::string::npos || key.find("..") != std::string::npos)
      return InvalidArgument("linux.sysctl: invalid key \"" + key + "\"");
  }
  plan.sysctl = spec.linux.sysctl;
  if ((!spec.hostname.empty() || !spec.domainname.empty()) && !ns.Has(oci::NamespaceType::kUts))
    return InvalidArgument("hostname: setting it needs a UTS namespace, and linux.namespaces has none");
  plan.hostname = spec.hostname;
  plan.domainname = spec.domainname;
  plan.cwd = spec.process.cwd;
  return plan;
}

namespace {

Status DoMount(int root_fd, const MountPlan& m) {
  const std::string what = m.field + ": mount " + (m.options.bind() ? "bind " + m.source : m.type) + " on " +
                           m.destination;
  ASSIGN_OR_RETURN(UniqueFd target, EnsureMountPoint(root_fd, m.destination, m.directory));
  const unsigned long flags = m.options.bind() ? m.options.flags & (MS_BIND | MS_REC) : m.options.flags;
  const char* data = m.options.bind() || m.options.data.empty() ? nullptr : m.options.data.c_str();
  if (::mount(m.source.c_str(), FdPath(target.get()).c_str(), m.options.bind() ? nullptr : m.type.c_str(), flags,
              data) != 0)
    return ErrnoStatus(what);
  if (!(m.options.bind() && m.options.bind_remount_flags()) && m.options.propagation.empty()) return Status::Ok();
  // The fd still names the directory under the new mount: reopen to reach it.
  ASSIGN_OR_RETURN(UniqueFd mounted, OpenInRoot(root_fd, m.destination, O_PATH));
  const std::string mp = FdPath(mounted.get());
  if (m.options.bind() && m.options.bind_remount_flags()) {
    unsigned long rf = MS_REMOUNT | MS_BIND | m.options.bind_remount_flags() | PreservedFlags(mp);
    if (::mount(nullptr, mp.c_str(), nullptr, rf, nullptr) != 0) return ErrnoStatus(what + " (remount)");
  }
  for (unsigned long p : m.options.propagation) {
    if (::mount(nullptr, mp.c_str(), nullptr, p, nullptr) != 0) return ErrnoStatus(what + " (propagation)");
  }
  return Status::Ok();
}

// Mount points from /proc/self/mountinfo, in mount order.
std::vector<std::string> MountPoints() {
  std::vector<std::string> out;
  auto table = ReadMountTable();
  if (!table.ok()) return out;
  for (MountEntry& m : *table) out.push_back(std::move(m.mount_point));
  return out;
}

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// pivot_root is refused when "/" is the initramfs (EINVAL): detach every
// other mount, move the rootfs over "/" and chroot into it.
Status MoveRoot(const std::string& rootfs) {
  std::vector<std::string> mps = MountPoints();
  for (auto it = mps.rbegin(); it != mps.rend(); ++it) {
    if (*it == "/" || Under(*it, rootfs) || Under(rootfs, *it)) continue;
    ::umount2(it->c_str(), MNT_DETACH);
  }
  if (::mount(rootfs.c_str(), "/", nullptr, MS_MOVE, nullptr) != 0) return ErrnoStatus("move rootfs " + rootfs + " to /");
  if (::chroot(".") != 0) return ErrnoStatus("chroot into " + rootfs);
  return Status::Ok();
}

Status PivotRoot(const std::string& rootfs) {
  // O_PATH: fchdir is all they serve, and on a virtio-fs rootfs a real open
  // would cost an OPENDIR and a RELEASEDIR round trip to virtiofsd.
  UniqueFd old_root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  UniqueFd new_root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!old_root || !new_root) return ErrnoStatus("open / and " + rootfs);
  if (::fchdir(new_root.get()) != 0) return ErrnoStatus("chdir " + rootfs);
  // pivot_root(".", ".") stacks the old root on the new one; detach it.
  if (::syscall(SYS_pivot_root, ".", ".") != 0) {
    if (errno != EINVAL) return ErrnoStatus("pivot_root " + rootfs);
    RETURN_IF_ERROR(MoveRoot(rootfs));
  } else {
    if (::fchdir(old_root.get()) != 0) return ErrnoStatus("chdir to old root");
    if (::mount(nullptr, ".", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) return ErrnoStatus("make old root rslave");
    if (::umount2(".", MNT_DETACH) != 0) return ErrnoStatus("detach old root");
  }
  if (::chdir("/") != 0) return ErrnoStatus("chdir /");
  return Status::Ok();
}

Status WriteSysctls(const std::map<std::string, std::string>& sysctl) {
  for (const auto& [key, value] : sysctl) {
    std::string path = "/proc/sys/" + key;
    std::replace(path.begin() + 10, path.end(), '.', '/');
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd || ::write(fd.get(), value.data(), value.size()) < 0)
      return ErrnoStatus("linux.sysctl." + key + ": write " + path);
  }
  return Status::Ok();
}

Status SetNames(const RootfsPlan& plan) {
  if (!plan.hostname.empty() && ::sethostname(plan.hostname.data(), plan.hostname.size()) != 0)
    return ErrnoStatus("sethostname " + plan.hostname);
  if (!plan.domainname.empty() && ::setdomainname(plan.domainname.data(), plan.domainname.size()) != 0)
    return ErrnoStatus("setdomainname " + plan.domainname);
  return Status::Ok();
}

}  // namespace

Status MaskPath(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("masked path " + path + ": stat");
  }
  int rc = S_ISDIR(st.st_mode) ? ::mount("tmpfs", path.c_str(), "tmpfs", MS_RDONLY, "size=0k")
                               : ::mount("/dev/null", path.c_str(), nullptr, MS_BIND, nullptr);
  if (rc != 0) return ErrnoStatus("masked path " + path + ": mount");
  return Status::Ok();
}

Status ReadonlyPath(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("readonly path " + path);
  }
  if (::mount(path.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return ErrnoStatus("readonly path " + path + ": bind");
  unsigned long f = MS_BIND | MS_REMOUNT | MS_RDONLY | PreservedFlags(path);
  if (::mount(nullptr, path.c_str(), nullptr, f, nullptr) != 0)
    return ErrnoStatus("readonly path " + path + ": remount ro");
  return Status::Ok();
}

Status SetupRootfs(const RootfsPlan& plan) {
  // Nothing the container mounts may propagate back into the agent.
  if (::mount(nullptr, "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) return ErrnoStatus("make / rslave");
  if (::mount(plan.rootfs.c_str(), plan.rootfs.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return ErrnoStatus("bind rootfs " + plan.rootfs);
  {
    UniqueFd root(::open(plan.rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) return ErrnoStatus("open rootfs " + plan.rootfs);
    for (const MountPlan& m : plan.mounts) RETURN_IF_ERROR(DoMount(root.get(), m));
    RETURN_IF_ERROR(CreateDevices(root.get(), plan));
    RETURN_IF_ERROR_CTX(MkdirAllInRoot(root.get(), plan.cwd).status(), "process.cwd");
  }
  RETURN_IF_ERROR(PivotRoot(plan.rootfs));
  if (plan.propagation && ::mount(nullptr, "/", nullptr, plan.propagation, nullptr) != 0)
    return ErrnoStatus("linux.rootfsPropagation: set on /");
  RETURN_IF_ERROR(WriteSysctls(plan.sysctl));
  for (const auto& p : plan.masked_paths) RETURN_IF_ERROR(MaskPath(p));
  for (const auto& p : plan.readonly_paths) RETURN_IF_ERROR(ReadonlyPath(p));
  RETURN_IF_ERROR(SetNames(plan));
  if (plan.readonly) {
    unsigned long f = MS_BIND | MS_REMOUNT | MS_RDONLY | PreservedFlags("/");
    if (::mount(nullptr, "/", nullptr, f, nullptr) != 0) return ErrnoStatus("root.readonly: remount / read-only");
  }
  return Status::Ok();
}

}  // namespace capsule::engine
