// Early mounts with the flags a distribution's init uses: nothing executable
// or set-uid where it has no business, world-writable places sticky.
#include "agent/init/mounts.h"

#include <errno.h>
#include <fmt/format.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/mount_table.h"

namespace capsule::agent::init {
namespace {

const log::Logger kMountsLog("init");

// Filesystem magics from linux/magic.h.
constexpr long kProcMagic = 0x9fa0;
constexpr long kSysfsMagic = 0x62656572;
constexpr long kTmpfsMagic = 0x01021994;
constexpr long kDevptsMagic = 0x1cd1;
constexpr long kCgroup2Magic = 0x63677270;

long MagicOf(const char* fstype) {
  std::string_view t = fstype;
  if (t == "proc") return kProcMagic;
  if (t == "sysfs") return kSysfsMagic;
  if (t == "tmpfs" || t == "devtmpfs") return kTmpfsMagic;
  if (t == "devpts") return kDevptsMagic;
  if (t == "cgroup2") return kCgroup2Magic;
  return 0;
}

// True when `target` is already a mount point of the wanted type (e.g. the
// kernel mounted devtmpfs itself, or the agent was restarted in place).
bool AlreadyMounted(const EarlyMount& m) {
  struct statfs fs{};
  struct stat self{}, parent{};
  if (::statfs(m.target, &fs) != 0 || fs.f_type != MagicOf(m.fstype)) return false;
  std::string up = std::string(m.target) + "/..";
  if (::stat(m.target, &self) != 0 || ::stat(up.c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

}  // namespace

std::vector<EarlyMount> EarlyMounts(bool cgroups) {
  constexpr unsigned long kNoSuidDevExec = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  std::vector<EarlyMount> mounts = {
      {"proc", "/proc", "proc", kNoSuidDevExec, nullptr},
      {"sysfs", "/sys", "sysfs", kNoSuidDevExec, nullptr},
      {"devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755"},
      // gid 5 is "tty" by Debian's (and every distribution's) convention.
      {"devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5"},
      {"shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"},
      {"tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"},
      {"tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"},
  };
  // nsdelegate: a container with its own cgroup namespace may manage the
  // subtree it was given, and nothing above it. favordynmods (Linux 6.0):
  // moving a process into a cgroup no longer waits for an RCU grace period,
  // which every container launch and exec does once (join its cgroup) and
  // which costs 15-20 ms under TCG; forks and exits pay a shared counter
  // instead of a per-CPU one, nothing in a VM of a few vCPUs.
  // container_api_vm_bench: create 51-60 -> 34-36 ms.
  if (cgroups)
    mounts.push_back({"cgroup2", "/sys/fs/cgroup", "cgroup2", kNoSuidDevExec, "nsdelegate,favordynmods", "nsdelegate"});
  return mounts;
}

Status MountOne(const EarlyMount& m) {
  RETURN_IF_ERROR(MkdirAll(m.target));
  if (AlreadyMounted(m)) {
    kMountsLog.Debug("{} already mounted", m.target);
    return Status::Ok();
  }
  if (::mount(m.source, m.target, m.fstype, m.flags, m.data) != 0) {
    if (errno != EINVAL || m.older_kernel_data == nullptr)
      return ErrnoStatus(fmt::format("mount {} on {}", m.fstype, m.target));
    kMountsLog.Warn("{}: the kernel refuses the options {} (older than Linux 6.0?); mounting with {}", m.target,
                    m.data, m.older_kernel_data);
    if (::mount(m.source, m.target, m.fstype, m.flags, m.older_kernel_data) != 0)
      return ErrnoStatus(fmt::format("mount {} on {}", m.fstype, m.target));
  }
  kMountsLog.Debug("mounted {} on {}", m.fstype, m.target);
  return Status::Ok();
}

Result<std::string> SuperOptionsOf(const std::string& mount_point) {
  ASSIGN_OR_RETURN(std::vector<MountEntry> table, ReadMountTable());
  // The last entry wins: a later mount on the same point hides the earlier.
  for (auto it = table.rbegin(); it != table.rend(); ++it)
    if (it->mount_point == mount_point) return it->super_options;
  return NotFound(mount_point + " is not a mount point");
}

Status MountEarlyFilesystems(bool cgroups) {
  for (const auto& m : EarlyMounts(cgroups)) RETURN_IF_ERROR(MountOne(m));
  return Status::Ok();
}

Status CreateDevSymlinks() {
  const std::pair<const char*, const char*> links[] = {
      {"/proc/self/fd", "/dev/fd"},
      {"/proc/self/fd/0", "/dev/stdin"},
      {"/proc/self/fd/1", "/dev/stdout"},
      {"/proc/self/fd/2", "/dev/stderr"},
  };
  for (const auto& [target, link] : links) {
    if (::symlink(target, link) != 0 && errno != EEXIST) return ErrnoStatus(fmt::format("symlink {}", link));
  }
  return Status::Ok();
}

}  // namespace capsule::agent::init
