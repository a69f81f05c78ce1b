// See fake_vm.h.
#include "tests/shim/fakes/fake_vm.h"

#include "runtime/common/file_util.h"

namespace capsule::testing {

Status FakeVmm::Pause() {
  ++pauses;
  state_ = hypervisor::VmState::kPaused;
  return Status::Ok();
}

Status FakeVmm::Resume() {
  ++resumes;
  state_ = hypervisor::VmState::kRunning;
  return Status::Ok();
}

Status FakeVmm::Stop(std::chrono::milliseconds) {
  state_ = hypervisor::VmState::kExited;
  return Status::Ok();
}

FakeSandboxVm::FakeSandboxVm(FakeVmProvider* owner, std::string id, std::string state_dir,
                             std::shared_ptr<FakeAgentClient> agent)
    : owner_(owner), id_(std::move(id)), state_dir_(std::move(state_dir)), agent_(std::move(agent)), vmm_(id_) {
  (void)MkdirAll(state_dir_ + "/mounts");
  timings_.total_ms = 1;
}

FakeSandboxVm::~FakeSandboxVm() {
  (void)Stop(std::chrono::milliseconds(0));
  owner_->Forget(id_);
}

Result<agentclient::AgentClient*> FakeSandboxVm::agent() {
  if (stopped_.load()) return FailedPrecondition("fake VM " + id_ + " is gone");
  return static_cast<agentclient::AgentClient*>(agent_.get());
}

std::string FakeSandboxVm::HostSharedPath(std::string_view rel) const {
  return state_dir_ + "/mounts" + (rel.empty() ? "" : "/" + std::string(rel));
}

std::string FakeSandboxVm::GuestSharedPath(std::string_view rel) const {
  return "/run/capsule/shared" + std::string(rel.empty() ? "" : "/" + std::string(rel));
}

agent::v1::Storage FakeSandboxVm::SharedFsStorage() const {
  agent::v1::Storage s;
  s.set_driver("virtiofs");
  s.set_source("capsule-shared");
  s.set_mount_point("/run/capsule/shared");
  return s;
}

void FakeSandboxVm::OnExit(ExitCallback callback) {
  std::lock_guard lock(mu_);
  on_exit_ = std::move(callback);
}

void FakeSandboxVm::Exited(bool requested) {
  if (exited_.exchange(true)) return;
  ExitCallback cb;
  {
    std::lock_guard lock(mu_);
    cb = on_exit_;
  }
  hypervisor::VmExit exit;
  exit.requested = requested;
  exit.reason = requested ? "host-qmp-quit" : "fake crash";
  if (cb) cb(exit);
}

Status FakeSandboxVm::Stop(std::chrono::milliseconds) {
  if (stopped_.exchange(true)) return Status::Ok();
  agent_->Close();
  Exited(true);
  (void)RemoveAll(state_dir_);
  return Status::Ok();
}

void FakeSandboxVm::Crash() {
  agent_->Close();
  Exited(false);
}

Result<vm::SandboxVmPtr> FakeVmProvider::Boot(const vm::SandboxVmSpec& spec) {
  std::shared_ptr<FakeAgentClient> agent;
  {
    std::lock_guard lock(mu_);
    boots_.push_back(spec);
    if (fail_next_) {
      Status st = *fail_next_;
      fail_next_.reset();
      return st;
    }
    agent = next_agent_ ? std::move(next_agent_) : std::make_shared<FakeAgentClient>();
    next_agent_.reset();
    agents_[spec.id] = agent;
  }
  auto vm = std::make_unique<FakeSandboxVm>(this, spec.id, StateDirFor(spec.id), agent);
  std::lock_guard lock(mu_);
  vms_[spec.id] = vm.get();
  ++live_;
  return vm::SandboxVmPtr(std::move(vm));
}

vm::SandboxVmPtr FakeVmProvider::Claim(const vm::SandboxVmSpec&, const shim::pod::PoolClaimant& who,
                                       const shim::pod::RecordClaimedVm& record, std::string* miss) {
  if (pool_ready_.load() <= 0) {
    *miss = "fake pool: no ready VM";
    return nullptr;
  }
  --pool_ready_;
  std::string id;
  std::shared_ptr<FakeAgentClient> agent;
  {
    std::lock_guard lock(mu_);
    id = "pool-fake-" + std::to_string(++pool_seq_);
    agent = next_agent_ ? std::move(next_agent_) : std::make_shared<FakeAgentClient>();
    next_agent_.reset();
    agents_[id] = agent;
  }
  if (Status st = record(id, StateDirFor(id)); !st.ok()) {
    *miss = st.ToString();
    return nullptr;
  }
  auto vm = std::make_unique<FakeSandboxVm>(this, id, StateDirFor(id), agent);
  std::lock_guard lock(mu_);
  claims_.push_back(who.sandbox_id);
  vms_[id] = vm.get();
  ++live_;
  return vm::SandboxVmPtr(std::move(vm));
}

std::vector<std::string> FakeVmProvider::claims() const {
  std::lock_guard lock(mu_);
  return claims_;
}

Result<vm::SandboxVmPtr> FakeVmProvider::Adopt(const std::string& state_dir) {
  return NotFound("fake provider: nothing to adopt in " + state_dir);
}

void FakeVmProvider::FailNextBoot(Status status) {
  std::lock_guard lock(mu_);
  fail_next_ = std::move(status);
}

std::shared_ptr<FakeAgentClient> FakeVmProvider::next_agent() {
  std::lock_guard lock(mu_);
  if (!next_agent_) next_agent_ = std::make_shared<FakeAgentClient>();
  return next_agent_;
}

std::shared_ptr<FakeAgentClient> FakeVmProvider::agent_of(const std::string& vm_id) const {
  std::lock_guard lock(mu_);
  auto it = agents_.find(vm_id);
  return it == agents_.end() ? nullptr : it->second;
}

FakeSandboxVm* FakeVmProvider::vm(const std::string& vm_id) const {
  std::lock_guard lock(mu_);
  auto it = vms_.find(vm_id);
  return it == vms_.end() ? nullptr : it->second;
}

std::vector<vm::SandboxVmSpec> FakeVmProvider::boots() const {
  std::lock_guard lock(mu_);
  return boots_;
}

void FakeVmProvider::Forget(const std::string& vm_id) {
  std::lock_guard lock(mu_);
  if (vms_.erase(vm_id) != 0) --live_;
}

}  // namespace capsule::testing
