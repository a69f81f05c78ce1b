// Fakes of the VM side for the shim's unit tests: FakeVmm (hypervisor::Vmm,
// records pause/resume), FakeSandboxVm (vm::SandboxVm over a FakeAgentClient
// and a temp state dir, able to "crash") and FakeVmProvider (boots them,
// fails on request, keeps each VM's agent for the test to script).
#pragma once

#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/vm/sandbox_vm.h"
#include "shim/pod/vm_provider.h"
#include "tests/shim/fakes/fake_agent_client.h"

namespace capsule::testing {

class FakeVmm : public hypervisor::Vmm {
 public:
  explicit FakeVmm(std::string id) : id_(std::move(id)) {}
  const std::string& id() const override { return id_; }
  const std::string& state_dir() const override { return id_; }
  pid_t vmm_pid() const override { return ::getpid(); }
  hypervisor::Accelerator accelerator() const override { return hypervisor::Accelerator::kTcg; }
  hypervisor::VmState state() const override { return state_; }
  const std::vector<hypervisor::Device>& boot_devices() const override { return boot_devices_; }
  const std::string& agent_token() const override { return agent_token_; }
  Status Pause() override;
  Status Resume() override;
  Status Stop(std::chrono::milliseconds) override;
  Status HotplugDevice(const hypervisor::Device&) override { return Unimplemented("fake"); }
  Status UnplugDevice(const std::string&, std::chrono::milliseconds) override { return Unimplemented("fake"); }
  Status PassFd(const std::string&, int) override { return Unimplemented("fake"); }
  Status SaveState(int, std::chrono::milliseconds) override { return Unimplemented("fake"); }
  Status LoadState(int, std::chrono::milliseconds) override { return Unimplemented("fake"); }
  int exit_fd() const override { return -1; }
  void OnExit(ExitCallback) override {}
  std::optional<hypervisor::VmExit> WaitExit(std::optional<std::chrono::milliseconds>) override { return std::nullopt; }
  Status Detach() override { return Status::Ok(); }

  int pauses = 0;
  int resumes = 0;

 private:
  std::string id_;
  std::vector<hypervisor::Device> boot_devices_;
  std::string agent_token_;
  std::atomic<hypervisor::VmState> state_{hypervisor::VmState::kRunning};
};

class FakeVmProvider;

class FakeSandboxVm : public vm::SandboxVm {
 public:
  FakeSandboxVm(FakeVmProvider* owner, std::string id, std::string state_dir, std::shared_ptr<FakeAgentClient> agent);
  ~FakeSandboxVm() override;

  const std::string& id() const override { return id_; }
  const std::string& state_dir() const override { return state_dir_; }
  pid_t vmm_pid() const override { return ::getpid(); }
  hypervisor::Accelerator accelerator() const override { return hypervisor::Accelerator::kTcg; }
  const vm::BootTimings& timings() const override { return timings_; }
  std::vector<pid_t> HostPids() const override { return {}; }
  std::optional<vm::BootNic> boot_nic() const override { return std::nullopt; }
  Result<agentclient::AgentClient*> agent() override;
  hypervisor::Vmm& vmm() override { return vmm_; }
  std::string HostSharedPath(std::string_view rel = "") const override;
  std::string GuestSharedPath(std::string_view rel = "") const override;
  agent::v1::Storage SharedFsStorage() const override;
  bool has_shared_fs() const override { return true; }
  // The shim dials the agent through agent() only.
  Result<UniqueFd> DialGuest(uint32_t port, std::chrono::milliseconds) override {
    return Unimplemented("fake VM: no guest vsock (port " + std::to_string(port) + ")");
  }
  void OnExit(ExitCallback callback) override;
  Status Stop(std::chrono::milliseconds graceful) override;
  Status Detach() override { return Status::Ok(); }

  // The VMM died on its own (not Stop()).
  void Crash();
  bool stopped() const { return stopped_.load(); }
  FakeVmm& fake_vmm() { return vmm_; }

 private:
  void Exited(bool requested);

  FakeVmProvider* owner_;
  std::string id_;
  std::string state_dir_;
  std::shared_ptr<FakeAgentClient> agent_;
  FakeVmm vmm_;
  vm::BootTimings timings_;
  std::mutex mu_;
  ExitCallback on_exit_;  // guarded by mu_
  std::atomic<bool> stopped_{false};
  std::atomic<bool> exited_{false};
};

class FakeVmProvider : public shim::pod::VmProvider {
 public:
  explicit FakeVmProvider(std::string state_root) : root_(std::move(state_root)) {}

  Result<vm::SandboxVmPtr> Boot(const vm::SandboxVmSpec& spec) override;
  // Hands out one of the pool VMs AddPoolVms() put there, calling `record`
  // first as the real provider does; else a miss.
  vm::SandboxVmPtr Claim(const vm::SandboxVmSpec& spec, const shim::pod::PoolClaimant& who,
                         const shim::pod::RecordClaimedVm& record, std::string* miss) override;
  Result<vm::SandboxVmPtr> Adopt(const std::string& state_dir) override;
  void AddPoolVms(int n) { pool_ready_ += n; }
  // Claims that got a VM, by sandbox id.
  std::vector<std::string> claims() const;
  std::string StateDirFor(std::string_view vm_id) const override { return root_ + "/vm/" + std::string(vm_id); }

  // The next Boot fails with `status`.
  void FailNextBoot(Status status);
  // Agents are created at boot; scripts for a VM not booted yet go here.
  std::shared_ptr<FakeAgentClient> next_agent();
  std::shared_ptr<FakeAgentClient> agent_of(const std::string& vm_id) const;
  FakeSandboxVm* vm(const std::string& vm_id) const;  // while alive
  std::vector<vm::SandboxVmSpec> boots() const;
  int live_vms() const { return live_.load(); }

 private:
  friend class FakeSandboxVm;
  void Forget(const std::string& vm_id);

  std::string root_;
  mutable std::mutex mu_;
  std::optional<Status> fail_next_;
  std::shared_ptr<FakeAgentClient> next_agent_;
  std::map<std::string, std::shared_ptr<FakeAgentClient>> agents_;
  std::map<std::string, FakeSandboxVm*> vms_;
  std::vector<vm::SandboxVmSpec> boots_;
  std::vector<std::string> claims_;
  std::atomic<int> live_{0};
  std::atomic<int> pool_ready_{0};
  int pool_seq_ = 0;  // guarded by mu_
};

}  // namespace capsule::testing
