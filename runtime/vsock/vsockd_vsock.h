// VsockdVsock: the VsockBackends served by capsule-vsockd, for hosts
// without /dev/vhost-vsock. Each VM gets its own capsule-vsockd (started
// here, in its own session so it outlives the starter); QEMU connects its
// vhost-user-vsock-pci (kVhostUser) or its virtserialport (kSerial) to the
// daemon's socket, and host programs dial the VM's hybrid socket.
// Files in the VM directory: vhost-vsock.sock or vsock-serial.sock (QEMU),
// vsock.sock (hybrid; guest->host port P: vsock.sock_P), vsockd.pid,
// vsockd.log, vsock.json.
#pragma once

#include <optional>
#include <string>

#include "runtime/common/unique_fd.h"
#include "runtime/vsock/vsock_backend.h"
#include "runtime/vsock/vsock_state.h"

namespace capsule::vsock {

class VsockdVsock : public VsockBackend {
 public:
  // `kind`: kVhostUser or kSerial.
  explicit VsockdVsock(VsockBackendOptions options, config::VsockBackendKind kind = config::VsockBackendKind::kVhostUser)
      : options_(std::move(options)), kind_(kind) {}

  config::VsockBackendKind kind() const override { return kind_; }
  Result<VmVsockPtr> Prepare(const VmVsockSpec& spec) override;
  Result<VmVsockPtr> Adopt(const std::string& vm_dir) override;

  // The capsule-vsockd binary Prepare would run.
  Result<std::string> VsockdPath() const;

 private:
  VsockBackendOptions options_;
  config::VsockBackendKind kind_;
};

// One VM's vhost-user vsock: the daemon (double-forked by SpawnDaemon, or
// adopted; either way held by a pidfd, never our child, so a process that
// detaches VMs keeps no zombies) and its sockets.
class VsockdVmVsock : public VmVsock {
 public:
  VsockdVmVsock(VsockState state, std::string vm_dir, UniqueFd pidfd);
  ~VsockdVmVsock() override;

  config::VsockBackendKind kind() const override { return state_.backend; }
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
  void RemoveFiles();

  VsockState state_;
  std::string vm_dir_;
  QemuVsockDevice device_;
  UniqueFd pidfd_;  // capsule-vsockd
  bool detached_ = false;
  bool stopped_ = false;
};

}  // namespace capsule::vsock
