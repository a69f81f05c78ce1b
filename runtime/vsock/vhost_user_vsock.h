// VhostUserVsock: the VsockBackend for hosts without /dev/vhost-vsock. Each
// VM gets its own capsule-vsockd (started here, in its own session so it
// outlives the starter), QEMU connects its vhost-user-vsock-pci to the
// daemon's socket, and host programs dial the VM's hybrid socket.
// Files in the VM directory: vhost-vsock.sock (QEMU), vsock.sock (hybrid;
// guest->host port P: vsock.sock_P), vsockd.pid, vsockd.log, vsock.json.
#pragma once

#include <optional>
#include <string>

#include "runtime/common/unique_fd.h"
#include "runtime/vsock/vsock_backend.h"
#include "runtime/vsock/vsock_state.h"

namespace capsule::vsock {

class VhostUserVsock : public VsockBackend {
 public:
  explicit VhostUserVsock(VsockBackendOptions options) : options_(std::move(options)) {}

  config::VsockBackendKind kind() const override { return config::VsockBackendKind::kVhostUser; }
  Result<VmVsockPtr> Prepare(const VmVsockSpec& spec) override;
  Result<VmVsockPtr> Adopt(const std::string& vm_dir) override;

  // The capsule-vsockd binary Prepare would run.
  Result<std::string> VsockdPath() const;

 private:
  VsockBackendOptions options_;
};

// One VM's vhost-user vsock: the daemon (double-forked by SpawnDaemon, or
// adopted; either way held by a pidfd, never our child, so a process that
// detaches VMs keeps no zombies) and its sockets.
class VhostUserVmVsock : public VmVsock {
 public:
  VhostUserVmVsock(VsockState state, std::string vm_dir, UniqueFd pidfd);
  ~VhostUserVmVsock() override;

  config::VsockBackendKind kind() const override { return config::VsockBackendKind::kVhostUser; }
  uint64_t guest_cid() const override { return state_.guest_cid; }
  const QemuVsockDevice& qemu_device() const override { return device_; }
  Result<UniqueFd> Dial(uint32_t port, std::chrono::milliseconds timeout) const override;
  std::string HostListenPath(uint32_t port) const override;
  void OnQemuStarted() override {}
  Status Shutdown(std::chrono::milliseconds grace) override;
  void Detach() override;

  pid_t vsockd_pid() const { return state_.vsockd_pid; }
  int vsockd_pidfd() const { return pidfd_.get(); }  // readable once it exited
  const std::string& hybrid_socket() const { return state_.hybrid_socket; }

 private:
  bool DaemonExited(std::chrono::milliseconds wait);
  void RemoveFiles();

  VsockState state_;
  std::string vm_dir_;
  QemuVsockDevice device_;
  UniqueFd pidfd_;  // capsule-vsockd
  bool detached_ = false;
  bool stopped_ = false;
};

}  // namespace capsule::vsock
