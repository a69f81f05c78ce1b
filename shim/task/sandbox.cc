// See sandbox.h.
#include "shim/task/sandbox.h"

#include <openssl/sha.h>

#include <fmt/format.h>

#include "runtime/common/logging.h"
#include "shim/task/agent_status.h"
#include "shim/task/guest_spec.h"

namespace capsule::shim::task {
namespace {

const log::Logger kLog("shim.sandbox");
namespace v1 = agentclient::v1;
using agentclient::AgentClient;

constexpr size_t kVmIdPrefix = 16;
// After a failed OOM poll that is not "VM gone": pause before the next.
constexpr std::chrono::milliseconds kOomRetryDelay{1000};

}  // namespace

std::string VmIdFor(std::string_view ns, std::string_view sandbox_id) {
  const std::string key = std::string(ns) + "/" + std::string(sandbox_id);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  ::SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  std::string prefix(sandbox_id.substr(0, kVmIdPrefix));
  for (char& c : prefix) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return fmt::format("{}-{:02x}{:02x}{:02x}{:02x}", prefix, digest[0], digest[1], digest[2], digest[3]);
}

Sandbox::Sandbox(SandboxParams params, vm::SandboxVmPtr vm) : p_(std::move(params)), vm_(std::move(vm)) {}

Result<std::shared_ptr<Sandbox>> Sandbox::Create(SandboxParams params, VmProvider& provider) {
  vm::SandboxVmSpec spec;
  spec.id = params.vm_id;
  spec.vcpus = params.size.vcpus;
  spec.memory_mib = params.size.memory_mib;
  kLog.Info("booting VM {} for sandbox {} ({} vCPU, {} MiB)", spec.id, params.id, spec.vcpus, spec.memory_mib);
  ASSIGN_OR_RETURN(vm::SandboxVmPtr vm, provider.Boot(spec));
  std::shared_ptr<Sandbox> s(new Sandbox(std::move(params), std::move(vm)));
  s->vmm_pid_ = s->vm_->vmm_pid();
  auto client = s->vm_->agent();
  if (!client.ok()) return std::move(client).status().WithContext("VM " + s->p_.vm_id);
  s->agent_ = std::make_shared<AgentHandle>(*client, s->p_.vm_id);
  s->watch_->agent = s->agent_;
  s->watch_->vm_id = s->p_.vm_id;
  s->vm_->OnExit([watch = s->watch_](const hypervisor::VmExit& exit) {
    watch->gone.store(true);
    if (!watch->stopping.load()) kLog.Error("the VM died: {}", exit.Describe(watch->vm_id));
    watch->agent->Revoke();  // every blocked call (waits, reads) ends now
  });
  if (Status st = s->CreateInAgent(); !st.ok()) return st;  // ~Sandbox stops the VM
  if (!s->p_.netns_path.empty()) {
    auto net = PodNetwork::Attach(s->p_.netns_path, s->vm_->vmm(), *s->agent_);
    if (!net.ok()) return std::move(net).status().WithContext("sandbox " + s->p_.id);
    s->network_ = std::move(net).value();
  }
  s->oom_thread_ = std::thread([s = s.get()] { s->OomLoop(); });
  const auto& t = s->vm_->timings();
  kLog.Info("sandbox {} ready: VMM pid {}, boot {:.0f} ms (prepare {:.0f}, vmm {:.0f}, agent {:.0f})", s->p_.id,
            s->vmm_pid_, t.total_ms, t.prepare_ms, t.vmm_start_ms, t.agent_ready_ms);
  return s;
}

Status Sandbox::CreateInAgent() {
  v1::CreateSandboxRequest req;
  req.set_sandbox_id(p_.id);
  req.set_hostname(p_.hostname);
  *req.add_storages() = vm_->SharedFsStorage();
  v1::Storage* shm = req.add_storages();
  shm->set_driver("tmpfs");
  shm->set_source("shm");
  shm->set_fstype("tmpfs");
  for (const char* o : {"nosuid", "nodev", "noexec", "mode=1777", kPodShmSize}) shm->add_options(o);
  shm->set_mount_point(std::string(kPodShmGuestPath));
  return FromAgent(agent_->Call<Status>([&](AgentClient& a) { return a.CreateSandbox(req); }),
                   "create sandbox " + p_.id);
}

void Sandbox::OomLoop() {
  while (!watch_->stopping.load()) {
    auto ev = agent_->Call<Result<v1::OOMEvent>>([](AgentClient& a) { return a.GetOOMEvent(kOomPollTimeout); });
    if (ev.ok()) {
      kLog.Warn("sandbox {}: container {} had an OOM kill", p_.id, ev->container_id());
      if (p_.on_oom && !ev->container_id().empty()) p_.on_oom(ev->container_id());
      continue;
    }
    const Code code = ev.status().code();
    if (code == Code::kDeadlineExceeded) continue;
    if (watch_->stopping.load() || agent_->revoked()) return;
    if (code == Code::kUnimplemented) {
      kLog.Warn("sandbox {}: the agent has no OOM events ({}); OOM kills will not be reported", p_.id,
                ev.status().message());
      return;
    }
    kLog.Warn("sandbox {}: OOM event poll: {}", p_.id, ev.status().ToString());
    std::this_thread::sleep_for(kOomRetryDelay);
  }
}

std::string Sandbox::HostSharedPath(std::string_view rel) const { return vm_->HostSharedPath(rel); }
std::string Sandbox::GuestSharedPath(std::string_view rel) const { return vm_->GuestSharedPath(rel); }

Status Sandbox::PauseVm() {
  std::lock_guard lock(stop_mu_);
  if (stopped_ || vm_gone()) return FailedPrecondition("sandbox " + p_.id + ": its VM is gone");
  RETURN_IF_ERROR_CTX(vm_->vmm().Pause(), "pause VM " + p_.vm_id);
  vm_paused_.store(true);
  return Status::Ok();
}

Status Sandbox::ResumeVm() {
  std::lock_guard lock(stop_mu_);
  if (stopped_ || vm_gone()) return FailedPrecondition("sandbox " + p_.id + ": its VM is gone");
  RETURN_IF_ERROR_CTX(vm_->vmm().Resume(), "resume VM " + p_.vm_id);
  vm_paused_.store(false);
  return Status::Ok();
}

Status Sandbox::Stop() {
  std::lock_guard lock(stop_mu_);
  if (stopped_) return Status::Ok();
  stopped_ = true;
  watch_->stopping.store(true);
  kLog.Info("stopping sandbox {} (VM {}, VMM pid {})", p_.id, p_.vm_id, vmm_pid_);
  // First end every call the shim's threads have in flight; the VM's own
  // stop then finds its agent closed and stops the VMM directly.
  if (agent_) agent_->Revoke();
  if (oom_thread_.joinable()) oom_thread_.join();
  Status st = vm_->Stop(kVmStopGrace);
  if (!st.ok()) kLog.Error("stop VM {}: {}", p_.vm_id, st.ToString());
  network_.reset();  // the taps go once the VMM no longer holds them
  return st;
}

Sandbox::~Sandbox() { (void)Stop(); }

}  // namespace capsule::shim::task
