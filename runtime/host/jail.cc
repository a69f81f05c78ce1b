// Planning (parent: lstat, readlink, strings) and entering (child: mount,
// mkdir, pivot_root only) a daemon's jail.
#include "runtime/host/jail.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <set>

namespace capsule {
namespace {

class Planner {
 public:
  explicit Planner(std::string mountpoint) { plan_.mountpoint = std::move(mountpoint); }

  void Add(JailStep::Kind kind, const std::string& path, std::string source, std::string what, bool device = false) {
    plan_.steps.push_back({kind, plan_.mountpoint + path, std::move(source), device, std::move(what)});
  }

  // Every missing parent of `path` (absolute, host-side name) in the jail.
  void Parents(const std::string& path) {
    for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
      std::string dir = path.substr(0, at);
      if (made_.insert(dir).second) Add(JailStep::kMkdir, dir, "", "make " + dir);
    }
  }

  void Dir(const std::string& path) {
    Parents(path);
    if (made_.insert(path).second) Add(JailStep::kMkdir, path, "", "make " + path);
  }

  JailPlan Done() && { return std::move(plan_); }

 private:
  JailPlan plan_;
  std::set<std::string> made_;
};

bool Absolute(const std::string& p) {
  return p.size() > 1 && p[0] == '/' && p.back() != '/' && p.find("/..") == std::string::npos &&
         p.find("//") == std::string::npos;
}

}  // namespace

Result<JailPlan> PlanJail(const JailSpec& spec) {
  struct stat st{};
  if (spec.mountpoint.empty() || spec.mountpoint[0] != '/' || ::stat(spec.mountpoint.c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode))
    return InvalidArgument("jail: mount point '" + spec.mountpoint + "' is not an existing absolute directory");
  Planner p(spec.mountpoint);
  p.Add(JailStep::kMountRoot, "", "", "mount the new root's tmpfs on " + spec.mountpoint);
  for (const std::string& dir : spec.read_only_dirs) {
    if (!Absolute(dir)) return InvalidArgument("jail: '" + dir + "' is not a plain absolute path");
    if (::lstat(dir.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      std::string target(4096, '\0');
      ssize_t n = ::readlink(dir.c_str(), target.data(), target.size());
      if (n <= 0 || static_cast<size_t>(n) >= target.size()) return ErrnoStatus("jail: readlink " + dir);
      target.resize(static_cast<size_t>(n));
      p.Parents(dir);
      p.Add(JailStep::kSymlink, dir, target, "link " + dir + " -> " + target);
    } else if (S_ISDIR(st.st_mode)) {
      p.Dir(dir);
      p.Add(JailStep::kBindReadOnly, dir, dir, "bind " + dir + " read-only");
    }
  }
  auto bind_file = [&](const std::string& file, bool device) -> Status {
    if (!Absolute(file)) return InvalidArgument("jail: '" + file + "' is not a plain absolute path");
    if (::stat(file.c_str(), &st) != 0) return Status::Ok();
    if (device ? !S_ISCHR(st.st_mode) : !S_ISREG(st.st_mode)) return Status::Ok();
    p.Parents(file);
    p.Add(JailStep::kTouch, file, "", "make the mount point " + file);
    p.Add(JailStep::kBindReadOnly, file, file, "bind " + file + (device ? "" : " read-only"), device);
    return Status::Ok();
  };
  for (const std::string& f : spec.read_only_files) RETURN_IF_ERROR(bind_file(f, false));
  for (const std::string& d : spec.devices) RETURN_IF_ERROR(bind_file(d, true));
  if (spec.proc) {
    p.Dir("/proc");
    p.Add(JailStep::kMountProc, "/proc", "", "mount a procfs (hidepid=2) on /proc");
    p.Dir("/dev");
    p.Add(JailStep::kSymlink, "/dev/fd", "/proc/self/fd", "link /dev/fd -> /proc/self/fd");
  }
  if (spec.sys) {
    p.Dir("/sys");
    p.Add(JailStep::kMountSys, "/sys", "", "mount a read-only sysfs on /sys");
  }
  p.Add(JailStep::kPivot, "", "", "pivot_root into the new root");
  JailPlan plan = std::move(p).Done();
  plan.steps.push_back({JailStep::kSealRoot, "/", "", false, "make the new root read-only"});
  return plan;
}

int EnterJail(const JailPlan& plan) {
  constexpr unsigned long kQuiet = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const JailStep& s = plan.steps[i];
    const char* path = s.path.c_str();
    bool ok = false;
    switch (s.kind) {
      case JailStep::kMountRoot:
        ok = ::mount("capsule-jail", path, "tmpfs", kQuiet, "mode=0755,size=64k,nr_inodes=256") == 0;
        break;
      case JailStep::kMkdir:
        ok = ::mkdir(path, 0755) == 0 || errno == EEXIST;
        break;
      case JailStep::kTouch: {
        int fd = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
        ok = fd >= 0;
        if (ok) ::close(fd);
        break;
      }
      case JailStep::kBindReadOnly: {
        // Device nodes stay usable (no nodev) and are written through a
        // read-only mount all the same: writing a device changes no file.
        // mount_setattr(AT_RECURSIVE): the host's mounts below a bound
        // directory (a writable /usr/local, say) are read-only too, where a
        // bind remount would cover the top mount only.
        ok = ::mount(s.source.c_str(), path, nullptr, MS_BIND | MS_REC, nullptr) == 0;
        if (!ok) break;
        mount_attr attr{};
        attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | (s.device ? MOUNT_ATTR_NOEXEC : MOUNT_ATTR_NODEV);
        ok = ::mount_setattr(AT_FDCWD, path, AT_RECURSIVE, &attr, sizeof attr) == 0;
        if (!ok && errno == ENOSYS) {
          const unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | (s.device ? MS_NOEXEC : MS_NODEV);
          ok = ::mount(nullptr, path, nullptr, flags, nullptr) == 0;
        }
        break;
      }
      case JailStep::kSymlink:
        ok = ::symlink(s.source.c_str(), path) == 0;
        break;
      case JailStep::kMountProc:
        // hidepid=2: the daemon's uid sees only its own processes.
        ok = ::mount("proc", path, "proc", kQuiet, "hidepid=2") == 0;
        break;
      case JailStep::kMountSys:
        ok = ::mount("sysfs", path, "sysfs", kQuiet | MS_RDONLY, nullptr) == 0;
        break;
      case JailStep::kPivot:
        // pivot_root(".", ".") stacks the old root on the new one; the
        // detach then drops it, and nothing of the host's tree is left.
        ok = ::chdir(path) == 0 && ::syscall(SYS_pivot_root, ".", ".") == 0 && ::umount2(".", MNT_DETACH) == 0 &&
             ::chdir("/") == 0;
        break;
      case JailStep::kSealRoot:
        ok = ::mount(nullptr, "/", nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | kQuiet, nullptr) == 0;
        break;
    }
    if (!ok) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace capsule
