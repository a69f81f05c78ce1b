// VirtiofsDaemon: the distribution's virtiofsd serving one VM's share dir
// over a vhost-user socket, started as a daemon so the VM can be adopted by
// another process, and stopped with everything it made: process, socket,
// pid file, log, share mount and share dir. Files, in the VM's state dir:
//   mounts/          the host's tree of the share (a shared bind mount)
//   shared/          what virtiofsd exports: a read-only slave bind of it
//                    (share_mount.h)
//   virtiofsd.sock   vhost-user socket QEMU connects to
//   virtiofsd.pid    the daemon's pid (adoption)
//   virtiofsd.log    its stderr
// virtiofsd serves one connection and exits when QEMU disconnects.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/config/config.h"
#include "runtime/virtiofs/share_mount.h"

namespace capsule::virtiofs {

enum class Sandbox { kNamespace, kChroot };

struct VirtiofsOptions {
  std::string daemon_path = "/usr/lib/qemu/virtiofsd";
  std::string vm_dir;          // the VM's state dir
  std::string cache = "auto";  // none | auto | always
  // namespace: mount+pid+net namespaces, pivot_root into the share (default,
  // needs the shared mount for late mounts). chroot: for hosts where
  // virtiofsd itself runs inside a container without namespace rights.
  Sandbox sandbox = Sandbox::kNamespace;
  uint32_t thread_pool_size = 0;  // --thread-pool-size; 0: no pool (config.h says why)
  bool xattr = false;
  // Container rootfs are mounts under the share: announce them so the guest
  // sees each as its own submount (distinct st_dev, no inode clashes).
  bool announce_submounts = true;
  std::chrono::milliseconds ready_timeout{5000};
  // config guest.modules: bound read-only at guest_abi::kSharedModulesDir
  // in the share before virtiofsd starts. "": none.
  std::string modules_dir;

  static VirtiofsOptions FromConfig(const config::Config& config, std::string vm_dir);
};

struct VirtiofsPaths {
  explicit VirtiofsPaths(std::string vm_dir) : dir(std::move(vm_dir)) {}
  std::string dir;
  std::string share() const { return dir + "/shared"; }     // exported, read-only at its top
  std::string host_tree() const { return dir + "/mounts"; }  // where the host mounts
  std::string socket() const { return dir + "/virtiofsd.sock"; }
  std::string pidfile() const { return dir + "/virtiofsd.pid"; }
  std::string log() const { return dir + "/virtiofsd.log"; }
};

// The daemon's argv (without sandboxing decisions left to the caller).
std::vector<std::string> VirtiofsdCommandLine(const VirtiofsOptions& options);

class VirtiofsDaemon {
 public:
  // Creates the share mount, starts virtiofsd, waits until its socket exists
  // (or it exits: the error carries its log). Nothing is left on failure.
  static Result<std::unique_ptr<VirtiofsDaemon>> Start(const VirtiofsOptions& options);
  // Adopts the daemon serving `vm_dir` (after a Detach, or from another
  // process). A daemon that has exited is adopted as not running, so that
  // Stop() cleans up.
  static Result<std::unique_ptr<VirtiofsDaemon>> Attach(const std::string& vm_dir);

  ~VirtiofsDaemon();  // Stop() unless detached
  VirtiofsDaemon(const VirtiofsDaemon&) = delete;
  VirtiofsDaemon& operator=(const VirtiofsDaemon&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& socket_path() const { return socket_; }
  std::string share_dir() const { return paths_.share(); }
  // Where the host makes the share's directories and mounts (share_mount.h).
  std::string host_dir() const { return paths_.host_tree(); }
  // Readable once the daemon exited (for an event loop); -1 if unknown.
  int exit_fd() const { return pidfd_.get(); }
  bool running() const;

  // SIGTERM, then SIGKILL after `grace`; removes every file and the share.
  Status Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  // Leaves daemon, share and files for Attach().
  void Detach();

 private:
  VirtiofsDaemon(VirtiofsPaths paths, pid_t pid, UniqueFd pidfd, SharedMount share)
      : paths_(std::move(paths)), socket_(paths_.socket()), pid_(pid), pidfd_(std::move(pidfd)), share_(std::move(share)) {}

  VirtiofsPaths paths_;
  std::string socket_;
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  SharedMount share_;
  bool done_ = false;  // stopped or detached
};

}  // namespace capsule::virtiofs
