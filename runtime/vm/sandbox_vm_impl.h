// SandboxVmImpl: the SandboxVm made of a VmVsock, a VirtiofsDaemon, a
// hypervisor Vmm and an AgentClient. Boot (boot.cc) and Adopt (adopt.cc)
// fill its parts one by one; whatever is there, Stop() takes it down in
// reverse order, so a failed boot and a normal stop share one path.
// Lifecycle: kRunning -> kStopped (Stop) | kDetached (Detach); both final.
#pragma once

#include <mutex>
#include <vector>

#include "runtime/virtiofs/virtiofs_daemon.h"
#include "runtime/vm/log_guard.h"
#include "runtime/vm/sandbox_vm.h"
#include "runtime/vsock/vsock_backend.h"

namespace capsule::vm {

class SandboxVmImpl final : public SandboxVm {
 public:
  SandboxVmImpl(std::string id, std::string state_dir);
  ~SandboxVmImpl() override;  // Stop(0) unless stopped or detached

  // Assembly, before the object is handed out (not thread-safe).
  void SetVsock(vsock::VmVsockPtr vsock) { vsock_ = std::move(vsock); }
  void SetVirtiofsd(std::unique_ptr<virtiofs::VirtiofsDaemon> d) { virtiofsd_ = std::move(d); }
  void SetVmm(hypervisor::VmmPtr vm) { vmm_ = std::move(vm); }
  void SetAgent(agentclient::AgentClientPtr agent) { agent_ = std::move(agent); }
  // Why there is no agent (adoption of a VM whose agent did not answer).
  void SetAgentError(Status st) { agent_error_ = std::move(st); }
  BootTimings& mutable_timings() { return timings_; }
  vsock::VmVsock* vsock() { return vsock_.get(); }
  virtiofs::VirtiofsDaemon* virtiofsd() { return virtiofsd_.get(); }
  hypervisor::Vmm* vmm_or_null() { return vmm_.get(); }

  const std::string& id() const override { return id_; }
  const std::string& state_dir() const override { return state_dir_; }
  pid_t vmm_pid() const override { return vmm_ ? vmm_->vmm_pid() : -1; }
  hypervisor::Accelerator accelerator() const override;
  const BootTimings& timings() const override { return timings_; }
  std::vector<pid_t> HostPids() const override;
  std::optional<BootNic> boot_nic() const override;

  Result<agentclient::AgentClient*> agent() override;
  hypervisor::Vmm& vmm() override { return *vmm_; }

  std::string HostSharedPath(std::string_view rel) const override;
  std::string GuestSharedPath(std::string_view rel) const override;
  agent::v1::Storage SharedFsStorage() const override;
  bool has_shared_fs() const override { return virtiofsd_ != nullptr; }
  Result<UniqueFd> DialGuest(uint32_t port, std::chrono::milliseconds timeout) override;

  void OnExit(ExitCallback callback) override;
  Status Stop(std::chrono::milliseconds graceful) override;
  Status Detach() override;

 private:
  enum class State { kRunning, kStopped, kDetached };
  static std::string_view StateName(State s);

  bool VmmRunning() const;
  // DestroySandbox(power_off) while the VMM driver waits up to `graceful`
  // for QEMU to exit before quitting or killing it.
  Status PowerOffGuest(std::chrono::milliseconds graceful);
  Status TearDown();

  const std::string id_;
  const std::string state_dir_;
  vsock::VmVsockPtr vsock_;
  std::unique_ptr<virtiofs::VirtiofsDaemon> virtiofsd_;
  hypervisor::VmmPtr vmm_;
  // Kept until destruction even after Stop() (Close() makes it fail calls),
  // so a pointer handed out by agent() never dangles.
  agentclient::AgentClientPtr agent_;
  Status agent_error_;
  BootTimings timings_;
  std::unique_ptr<LogGuard> log_guard_;  // while this process owns the VM

  std::mutex op_mu_;            // serializes Stop and Detach
  mutable std::mutex mu_;
  State state_ = State::kRunning;  // guarded by mu_
};

}  // namespace capsule::vm
