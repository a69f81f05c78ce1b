// VmEndpoint: capsule-agent as PID 1 of a real pod VM (QEMU, TCG here), built
// from build/deploy/{vmlinuz,capsule-initrd.img}, reached over vsock through
// capsule-vsockd (vhost-user-vsock), with the busybox rootfs on the virtio-fs
// share served by virtiofsd. One boot serves every test of the binary.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include <grpcpp/channel.h>

#include "runtime/common/file_util.h"
#include "runtime/virtiofs/virtiofs_daemon.h"
#include "runtime/vsock/vsock_backend.h"
#include "tests/agent/boot/qemu_guest.h"
#include "tests/agent/containers/agent_endpoint.h"

namespace capsule::agent::testing {

class VmEndpoint final : public AgentEndpoint {
 public:
  static Result<std::unique_ptr<VmEndpoint>> Start();
  ~VmEndpoint() override;

  std::string name() const override { return "vm"; }
  v1::Agent::Stub& stub() override { return *stub_; }
  std::string rootfs() const override;
  std::vector<v1::Storage> sandbox_storages() const override;
  std::string scratch_dir() const override { return "/tmp"; }
  std::string cgroup_parent_dir() const override { return "/sys/fs/cgroup/capsule"; }
  bool has_resource_controllers() const override { return true; }
  bool sets_clock() const override { return true; }

  // Host milliseconds from QEMU's start to the agent's ready line.
  double boot_ms() const { return boot_ms_; }

 private:
  VmEndpoint() = default;
  // Keeps reading the serial console so a chatty guest never blocks on a
  // full pipe; stopped before QEMU is.
  void StartConsoleDrain();
  void StopConsoleDrain();

  std::optional<TempDir> dir_;
  std::unique_ptr<virtiofs::VirtiofsDaemon> virtiofsd_;
  vsock::VsockBackendPtr backend_;
  vsock::VmVsockPtr vsock_;
  std::unique_ptr<QemuGuest> guest_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Agent::Stub> stub_;
  std::atomic<bool> stop_drain_{false};
  std::thread drain_;
  double boot_ms_ = 0;
};

// EndpointFactory for INSTANTIATE_TEST_SUITE_P.
Result<AgentEndpointPtr> StartVmEndpoint();

}  // namespace capsule::agent::testing
