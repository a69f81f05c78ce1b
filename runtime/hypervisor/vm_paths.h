// Layout of a VM's state dir (default <runtime.state_dir>/vm/<id>/) and the
// ownership lock in it. Everything another process needs to adopt the VM is
// found from the directory alone:
//   vm.json       VmRecord: spec, VMM identity, sockets, hot-plugged devices
//   vm.lock       flock(LOCK_EX) held by the one process driving the VM
//   qmp.sock      QMP monitor (QEMU)
//   console.log   guest serial console
//   qemu.log      the VMM's stderr (timestamped)
//   qemu.pid      the VMM's pid (written by the launcher once QEMU runs)
// Other components keep their files here too (virtiofsd.*, shared/, vsock
// sockets); each removes its own and the last one removes the directory.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::hypervisor {

struct VmPaths {
  explicit VmPaths(std::string state_dir) : dir(std::move(state_dir)) {}
  std::string dir;
  std::string record() const { return dir + "/vm.json"; }
  std::string lock() const { return dir + "/vm.lock"; }
  std::string qmp_socket() const { return dir + "/qmp.sock"; }
  std::string console_log() const { return dir + "/console.log"; }
  std::string vmm_log() const { return dir + "/qemu.log"; }
  std::string pidfile() const { return dir + "/qemu.pid"; }
};

// <state_root>/vm/<vm_id>
std::string DefaultVmStateDir(std::string_view state_root, std::string_view vm_id);

// Exclusive, non-blocking flock on vm.lock: one driver per VM. Released when
// the object dies (or with the process), so a crashed owner never blocks an
// adopter.
class VmLock {
 public:
  // create: make vm.lock if missing (launch); else NOT_FOUND when absent.
  // FAILED_PRECONDITION when another open file description holds it.
  // `wait`: how long a lock held by someone else is retried. A lock its
  // owner just released can look held for a moment: flock belongs to the
  // open file, and a child the owner was forking at that time holds a copy
  // until its exec closes it (O_CLOEXEC).
  static Result<VmLock> Acquire(const std::string& lock_path, bool create,
                                std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  VmLock() = default;
  bool held() const { return fd_.valid(); }
  // Removes the lock file while still holding the lock, then releases it.
  void RemoveAndRelease();

 private:
  VmLock(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

// Removes the VMM's files from the state dir (not other components' files),
// vm.json first and vm.lock (releasing `lock`) last, then the directory
// itself if nothing else is left in it.
Status RemoveVmmFiles(const VmPaths& paths, const std::string& console_log, VmLock& lock);

}  // namespace capsule::hypervisor
