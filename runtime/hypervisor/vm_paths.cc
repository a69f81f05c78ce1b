// State dir layout helpers and the flock-based ownership lock.
#include "runtime/hypervisor/vm_paths.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>


#include <fmt/format.h>

#include "runtime/common/backoff.h"
#include "runtime/common/logging.h"

namespace capsule::hypervisor {
namespace {
const log::Logger kVmPathsLog("hypervisor");
}  // namespace

std::string DefaultVmStateDir(std::string_view state_root, std::string_view vm_id) {
  std::string root(state_root);
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root + "/vm/" + std::string(vm_id);
}

Result<VmLock> VmLock::Acquire(const std::string& lock_path, bool create, std::chrono::milliseconds wait) {
  int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0);
  UniqueFd fd(::open(lock_path.c_str(), flags, 0600));
  if (!fd) {
    if (errno == ENOENT) return NotFound("no VM state at " + lock_path + " (vm.lock missing)");
    return ErrnoStatus("open " + lock_path);
  }
  int err = 0;  // of the last try; anything but EWOULDBLOCK ends the wait
  const bool settled = WaitUntil(
      [&] {
        err = ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0 ? 0 : errno;
        return err != EWOULDBLOCK;
      },
      wait, {std::chrono::milliseconds(5), std::chrono::milliseconds(5)});
  if (!settled)
    return FailedPrecondition(fmt::format("VM is driven by another process ({} is locked{})", lock_path,
                                          wait.count() > 0 ? fmt::format(", waited {} ms", wait.count()) : ""));
  if (err != 0) return ErrnoStatus("flock " + lock_path, err);
  return VmLock(std::move(fd), lock_path);
}

void VmLock::RemoveAndRelease() {
  if (!fd_) return;
  // Unlinked while held: an adopter that opened the old inode gets the lock
  // only after us, then finds vm.json gone and reports NOT_FOUND.
  ::unlink(path_.c_str());
  fd_.reset();
}

Status RemoveVmmFiles(const VmPaths& paths, const std::string& console_log, VmLock& lock) {
  Status first;
  for (const std::string& f : {paths.record(), paths.qmp_socket(), console_log, paths.vmm_log(), paths.pidfile()}) {
    if (f.empty()) continue;
    if (::unlink(f.c_str()) != 0 && errno != ENOENT && first.ok()) first = ErrnoStatus("unlink " + f);
  }
  lock.RemoveAndRelease();
  if (::rmdir(paths.dir.c_str()) != 0 && errno != ENOENT) {
    if (errno == ENOTEMPTY || errno == EEXIST) {
      kVmPathsLog.Debug("state dir {} still holds other components' files; leaving it", paths.dir);
    } else if (first.ok()) {
      first = ErrnoStatus("rmdir " + paths.dir);
    }
  }
  return first;
}

}  // namespace capsule::hypervisor
