// See vmm_user.h.
#include "runtime/hypervisor/vmm_user.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/capability.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/host/daemon.h"
#include "runtime/host/process_uids.h"

namespace capsule::hypervisor {
namespace {

constexpr const char* kKvmDevice = "/dev/kvm";
const log::Logger kVmmUserLog("hypervisor");

}  // namespace

bool VmmUsersEnabled(const config::Config& config) {
  return config.hypervisor.vmm_uid_base != 0 && HaveEffectiveCapabilities({CAP_SETUID, CAP_SETGID});
}

Status CheckVmmCanRead(const std::string& path, std::string_view key, bool exec) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(fmt::format("{} {}", key, path));
  const mode_t need = exec ? (S_IROTH | S_IXOTH) : S_IROTH;
  if ((st.st_mode & need) != need)
    return FailedPrecondition(fmt::format("{} {} (mode {:04o}) is not {} by others, and QEMU runs as a uid of its own "
                                          "(hypervisor.vmm_uid_base)", key, path, st.st_mode & 07777,
                                          exec ? "readable and executable" : "readable"));
  for (size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0; slash = path.rfind('/', slash - 1)) {
    const std::string dir = path.substr(0, slash);
    if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0)
      return FailedPrecondition(fmt::format("{} {}: its directory {} (mode {:04o}) is closed to others, and QEMU "
                                            "runs as a uid of its own (hypervisor.vmm_uid_base)", key, path, dir,
                                            st.st_mode & 07777));
  }
  return Status::Ok();
}

Result<VmmUser> AcquireVmmUser(const config::Config& config, const std::string& vm_id) {
  const std::string dir = config.runtime.state_dir + "/vmm-uids";
  RETURN_IF_ERROR_CTX(MkdirAll(dir, 0700), "the VMM uid locks");
  const uint32_t base = config.hypervisor.vmm_uid_base;
  const uint32_t count = config.hypervisor.vmm_uid_count;
  const uint32_t first = static_cast<uint32_t>(std::hash<std::string>{}(vm_id) % count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t uid = base + (first + i) % count;
    const std::string path = fmt::format("{}/{}.lock", dir, uid);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return ErrnoStatus("open " + path);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) continue;  // a live QEMU holds it
      return ErrnoStatus("lock " + path);
    }
    // The lock is QEMU's to hold, so a compromised QEMU can close it: the
    // uid is free only once nothing runs as it.
    ASSIGN_OR_RETURN(std::vector<pid_t> running, ProcessesRunningAs(uid));
    if (!running.empty()) {
      kVmmUserLog.Warn("VMM uid {} is unlocked but pid {} still runs as it (a VMM that let its lock go?); skipping it",
                       uid, running.front());
      continue;
    }
    VmmUser u;
    u.uid = uid;
    u.gid = uid;
    u.lock = std::move(fd);
    struct stat st{};
    if (::stat(kKvmDevice, &st) == 0 && st.st_gid != 0) u.groups.push_back(st.st_gid);
    return u;
  }
  return ResourceExhausted(fmt::format("every VMM uid in {}..{} is taken (hypervisor.vmm_uid_count {})", base,
                                       base + count - 1, count));
}

}  // namespace capsule::hypervisor
