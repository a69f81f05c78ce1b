// See sandbox.h.
#include "shim/pod/sandbox.h"

#include <fcntl.h>
#include <unistd.h>
#include <time.h>

#include <fmt/format.h>

#include <future>
#include <optional>

#include "runtime/common/elapsed.h"
#include "runtime/common/logging.h"
#include "runtime/common/rate_limiter.h"
#include "runtime/common/reasons.h"
#include "runtime/common/sha256.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vm/pod_record.h"
#include "runtime/wire/agent_auth.h"
#include "runtime/wire/guest_abi.h"
#include "shim/pod/agent_status.h"

namespace capsule::shim::pod {
namespace {

const log::Logger kSandboxLog("shim.sandbox");
namespace v1 = agentclient::v1;
using agentclient::AgentClient;

constexpr size_t kVmIdPrefix = 16;
// After a failed OOM poll that is not "VM gone": pause before the next.
constexpr std::chrono::milliseconds kOomRetryDelay{1000};
// More real OOM kills than this in a second are a guest flooding us.
constexpr uint32_t kMaxOomEventsPerSecond = 10;

}  // namespace

std::string VmIdFor(std::string_view ns, std::string_view sandbox_id) {
  const std::string key = std::string(ns) + "/" + std::string(sandbox_id);
  const std::string digest = Sha256Hex(key);
  std::string prefix(sandbox_id.substr(0, kVmIdPrefix));
  for (char& c : prefix) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return prefix + "-" + digest.substr(0, 8);
}

namespace {

std::string PodLabel(const SandboxParams& p) {
  return p.claimant.pod.empty() ? "pod " + p.id : fmt::format("pod {} ({})", p.claimant.pod, p.id);
}

}  // namespace

Sandbox::Sandbox(SandboxParams params, vm::SandboxVmPtr vm)
    : p_(std::move(params)), label_(PodLabel(p_)), vm_(std::move(vm)), vm_id_(vm_->id()) {}

Result<vm::SandboxVmPtr> Sandbox::ObtainVm(const SandboxParams& p, VmProvider& provider, bool* claimed) {
  vm::SandboxVmSpec spec;
  spec.id = p.vm_id;
  spec.vcpus = p.size.vcpus;
  spec.memory_mib = p.size.memory_mib;
  spec.cancel_fd = p.cancel ? p.cancel->fd() : -1;
  auto record = [&](const std::string& id, const std::string& dir) { return p.record ? p.record(id, dir) : Status::Ok(); };
  std::string miss = "the pool is not used for this sandbox";
  if (p.use_pool) {
    if (vm::SandboxVmPtr v = provider.Claim(spec, p.claimant, record, &miss)) {
      *claimed = true;
      return v;
    }
  }
  *claimed = false;
  kSandboxLog.Info("sandbox {}: cold-booting VM {} ({} vCPU, {} MiB): {}", p.id, spec.id, spec.vcpus, spec.memory_mib,
                   miss);
  // A failed claim may have recorded its VM: the bundle names ours again.
  RETURN_IF_ERROR(record(spec.id, provider.StateDirFor(spec.id)));
  return provider.Boot(spec);
}

Result<std::shared_ptr<Sandbox>> Sandbox::Create(SandboxParams params, VmProvider& provider) {
  using Steady = std::chrono::steady_clock;
  auto ms_since = [](Steady::time_point t) {
    return std::chrono::duration<double, std::milli>(Steady::now() - t).count();
  };
  auto t = Steady::now();
  bool claimed = false;
  const CancelTokenPtr cancel = params.cancel;
  if (cancel && cancel->cancelled()) return cancel->reason();
  ASSIGN_OR_RETURN(vm::SandboxVmPtr vm, ObtainVm(params, provider, &claimed));
  if (cancel && cancel->cancelled()) return cancel->reason();  // the VM goes with `vm`
  std::shared_ptr<Sandbox> s(new Sandbox(std::move(params), std::move(vm)));
  s->timings_.claimed = claimed;
  s->timings_.vm_ms = ms_since(t);
  s->vmm_pid_ = s->vm_->vmm_pid();
  auto client = s->vm_->agent();
  if (!client.ok()) return std::move(client).status().WithContext("VM " + s->vm_id_);
  s->agent_ = std::make_shared<AgentHandle>(*client, s->vm_id_, s->label_, s->p_.agent_timeout);
  // A raw pointer is safe: the hook runs inside a call on the handle, and
  // Stop() (at the latest from ~Sandbox) revokes the handle, which waits
  // for every call in flight and fails every later one before the hook.
  s->agent_->OnUnanswered([raw = s.get()](const Status& why) { raw->FailInBackground(why); });
  s->watch_->agent = s->agent_;
  s->watch_->vm_id = s->vm_id_;
  s->vm_->OnExit([watch = s->watch_](const hypervisor::VmExit& exit) {
    watch->gone.store(true);
    if (watch->failed.load()) {
      kSandboxLog.Warn("VM {} stopped after its agent stopped answering", watch->vm_id);
    } else if (!watch->Stopping()) {
      kSandboxLog.Error("the VM died: {}", exit.Describe(watch->vm_id));
    }
    watch->agent->Revoke();  // every blocked call (waits, reads) ends now
  });
  // Containerd giving up on the pod cuts the set-up call below: it fails,
  // and ~Sandbox stops the VM.
  std::optional<CancelToken::Registration> on_cancel;
  if (cancel) on_cancel.emplace(cancel->OnCancel([agent = s->agent_] { agent->Revoke(); }));
  // The host's half of the network first: the guest call names its NICs.
  // Then one guest call, answered once the guest is fresh (clock, RNG) and
  // the pod and its network exist in it, so no container runs on a stale
  // clock or RNG. What the guest does not wait for is done beside that
  // call: the boot NIC's tap moved into the pod's netns (the kernel takes
  // 14-22 ms for that here), the VM's cgroup, the port-forward listener.
  t = Steady::now();
  const uint64_t calls_before = s->agent_->round_trips();
  Status attached = s->AttachNetwork();
  s->timings_.network_ms = ms_since(t);
  if (cancel && cancel->cancelled()) return cancel->reason();  // ~Sandbox stops the VM
  if (!attached.ok()) return attached;
  Sandbox* raw = s.get();
  auto boot_nic = std::async(std::launch::async, [raw, &ms_since]() -> Status {
    if (!raw->network_) return Status::Ok();
    const auto start = Steady::now();
    Status st = raw->network_->FinishBootNic();
    raw->timings_.boot_nic_ms = ms_since(start);
    return st.ok() ? st : std::move(st).WithContext("sandbox " + raw->p_.id);
  });
  auto beside = std::async(std::launch::async, [raw, &ms_since] {
    const auto start = Steady::now();
    raw->JoinCgroup();
    raw->StartPortForward();
    raw->timings_.beside_ms = ms_since(start);
  });
  auto start = Steady::now();
  Status set_up = s->SetupInGuest();
  s->timings_.guest_ms = ms_since(start);
  beside.get();
  Status nic = boot_nic.get();
  s->timings_.guest_calls = s->agent_->round_trips() - calls_before;
  s->timings_.setup_ms = ms_since(t);
  if (cancel && cancel->cancelled()) return cancel->reason();  // ~Sandbox stops the VM
  if (!set_up.ok()) return set_up;                           // ~Sandbox stops the VM
  if (!nic.ok()) return nic;                                 // ~Sandbox stops the VM
  s->oom_thread_ = std::thread([s = s.get()] { s->OomLoop(); });
  {
    std::lock_guard lock(s->stop_mu_);
    s->MoveLocked(SandboxState::kCreating, SandboxState::kReady);
  }
  const SandboxStartTimings& st = s->timings_;
  s->WritePodRecord();
  const std::string nics = !s->network_ || s->network_->nic_count() == 0 ? "no NIC"
                           : s->network_->used_boot_nic()
                               ? fmt::format("boot NIC, taken over in {:.1f} ms beside the guest call", st.boot_nic_ms)
                               : "hot-plugged NIC";
  kSandboxLog.Info(
      "sandbox {} ready in VM {} (VMM pid {}): {} {:.1f} ms, then {:.1f} ms: host network {:.1f} ms ({}), "
      "guest set-up {:.1f} ms in {} guest round trip(s), cgroup and port-forward {:.1f} ms beside it",
      s->p_.id, s->vm_id_, s->vmm_pid_, st.claimed ? "claimed from the pool in" : "cold boot", st.vm_ms, st.setup_ms,
      st.network_ms, nics, st.guest_ms, st.guest_calls, st.beside_ms);
  return s;
}

void Sandbox::JoinCgroup() {
  if (p_.cgroups_path.empty()) return;
  auto cg = ProcessCgroup::Join(p_.cgroups_path, vm_->HostPids());
  if (cg.ok()) {
    cgroup_ = std::move(*cg);
  } else {
    kSandboxLog.Error("sandbox {}: its VM's processes stay outside the pod's cgroup: {}", p_.id,
                      cg.status().ToString());
  }
}

// Not fatal: the pod runs; `capsule-runtime ps` and the metrics then show
// its VM without the pod's names.
void Sandbox::WritePodRecord() const {
  vm::PodRecord r;
  r.sandbox_id = p_.id;
  r.ns = p_.claimant.ns;
  r.pod_name = p_.pod_name;
  r.pod_namespace = p_.pod_namespace;
  r.shim_pid = ::getpid();
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  r.started_unix_ms = static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
  r.claimed = timings_.claimed;
  r.vm_ms = timings_.vm_ms;
  r.setup_ms = timings_.setup_ms;
  if (Status st = vm::WritePodRecord(vm_->state_dir(), r); !st.ok())
    kSandboxLog.Warn("sandbox {}: {}", p_.id, st.ToString());
}

Status Sandbox::SetupInGuest() {
  v1::SetupSandboxRequest req;
  // The wall clock (a VM paused in the pool for hours is that far behind)
  // and fresh entropy from the host's CSPRNG.
  RETURN_IF_ERROR_CTX(vm::SandboxVm::HostFreshness(req.mutable_time(), req.mutable_randomness()), "VM " + vm_id_);
  v1::CreateSandboxRequest& sb = *req.mutable_sandbox();
  sb.set_sandbox_id(p_.id);
  sb.set_hostname(p_.hostname);
  if (vm_->has_shared_fs()) *sb.add_storages() = vm_->SharedFsStorage();
  *sb.add_storages() = vm::SandboxVm::PodShmStorage();  // a pooled VM has it mounted already
  if (network_) network_->AddToSetup(req);
  req.set_holder_container_id(p_.holder_container_id);
  auto done = agent_->Call<Result<v1::SetupSandboxResponse>>([&](AgentClient& a) { return a.SetupSandbox(req); });
  if (!done.ok()) return FromAgent(done.status(), "set up sandbox " + p_.id + " in VM " + vm_id_);
  if (network_) RETURN_IF_ERROR_CTX(network_->CheckGuest(*done), "sandbox " + p_.id);
  if (!p_.holder_container_id.empty() && done->holder_pid() == 0)
    return Internal("set up sandbox " + p_.id + " in VM " + vm_id_ + ": the agent named no pid for the pod holder");
  holder_pid_ = done->holder_pid();
  // The agent's own account, logged here: a guest console line costs the
  // guest about a ms under TCG.
  auto ms = MsOfMicrosField;
  kSandboxLog.Info(
      "sandbox {} set up in the guest, the agent's {:.1f} ms: clock and RNG {:.1f} ms, pod and holder {:.1f} ms, {} "
      "NIC(s) {:.1f} ms, routes {:.1f} ms; guest clock set, guest RNG reseeded with {} bytes from the host (reseed {} "
      "since its boot)",
      p_.id, ms(done->handled_us()), ms(done->clock_rng_us()), ms(done->pod_us()), req.interfaces_size(),
      ms(done->nics_us()), ms(done->routes_us()), guest_abi::kGuestReseedBytes, done->randomness().reseeds());
  return Status::Ok();
}

Status Sandbox::AttachNetwork() {
  if (p_.netns_path.empty()) return Status::Ok();
  auto net = PodNetwork::Attach(p_.netns_path, vm_->vmm(), vm_->boot_nic());
  if (!net.ok()) return std::move(net).status().WithContext("sandbox " + p_.id);
  network_ = std::move(net).value();
  return Status::Ok();
}

void Sandbox::StartPortForward() {
  if (p_.netns_path.empty()) return;
  // The VM outlives the listener (Stop stops it first), and its token is
  // fixed once the VM is ours.
  auto dial = [vm = vm_.get(), token = vm_->vmm().agent_token()](std::chrono::milliseconds timeout) -> Result<UniqueFd> {
    ASSIGN_OR_RETURN(UniqueFd fd, vm->DialGuest(guest_abi::kPortForwardVsockPort, timeout));
    if (!token.empty()) RETURN_IF_ERROR_CTX(agent_auth::Prove(fd.get(), token, timeout), "port-forward stream");
    return fd;
  };
  auto listener = network::PortForwardListener::Start(p_.netns_path, std::move(dial), label_);
  if (!listener.ok()) {
    kSandboxLog.Error("{}: kubectl port-forward will not reach this pod: {}", label_, listener.status().ToString());
    return;
  }
  port_forward_ = std::move(listener).value();
}

void Sandbox::AddContainer(const std::string& id) {
  std::lock_guard lock(containers_mu_);
  containers_.insert(id);
}

void Sandbox::RemoveContainer(const std::string& id) {
  std::lock_guard lock(containers_mu_);
  containers_.erase(id);
}

bool Sandbox::HostsContainer(const std::string& id) const {
  std::lock_guard lock(containers_mu_);
  return containers_.count(id) != 0;
}

void Sandbox::OomLoop() {
  // The guest decides what GetOOMEvent returns: it may name a container of
  // another pod (whose containerd task would be marked OOM-killed) or send
  // a flood. Only this pod's containers count, at a bounded rate; the rest
  // is dropped with a warning that is itself bounded.
  RateLimiter events(kMaxOomEventsPerSecond, std::chrono::seconds(1));
  RateLimiter warnings(1, std::chrono::seconds(10));
  while (!watch_->Stopping()) {
    auto ev = agent_->LongPoll<Result<v1::OOMEvent>>([](AgentClient& a) { return a.GetOOMEvent(kOomPollTimeout); });
    if (ev.ok()) {
      const std::string& cid = ev->container_id();
      if (!HostsContainer(cid)) {
        ++ignored_ooms_;
        if (warnings.Allow())
          kSandboxLog.Warn(
              "sandbox {}: the guest reported an OOM kill of '{}', no container of this pod: ignored ({} so far)",
              p_.id, cid.substr(0, 128), ignored_ooms_.load());
        continue;
      }
      if (!events.Allow()) {
        ++ignored_ooms_;
        if (warnings.Allow())
          kSandboxLog.Warn("sandbox {}: the guest reports OOM kills faster than {} a second: dropped ({} so far)",
                           p_.id, kMaxOomEventsPerSecond, ignored_ooms_.load());
        continue;
      }
      kSandboxLog.Warn("sandbox {}: container {} had an OOM kill", p_.id, cid);
      if (p_.on_oom) p_.on_oom(cid);
      continue;
    }
    const Code code = ev.status().code();
    if (code == Code::kDeadlineExceeded) continue;
    if (watch_->Stopping() || agent_->revoked()) return;
    if (code == Code::kUnimplemented) {
      kSandboxLog.Warn("sandbox {}: the agent has no OOM events ({}); OOM kills will not be reported", p_.id,
                       ev.status().message());
      return;
    }
    kSandboxLog.Warn("sandbox {}: OOM event poll: {}", p_.id, ev.status().ToString());
    std::this_thread::sleep_for(kOomRetryDelay);
  }
}

std::string Sandbox::HostSharedPath(std::string_view rel) const { return vm_->HostSharedPath(rel); }
std::string Sandbox::GuestSharedPath(std::string_view rel) const { return vm_->GuestSharedPath(rel); }

std::string_view SandboxStateName(SandboxState s) {
  switch (s) {
    case SandboxState::kCreating: return "creating";
    case SandboxState::kReady: return "ready";
    case SandboxState::kPaused: return "paused";
    case SandboxState::kStopping: return "stopping";
    case SandboxState::kStopped: return "stopped";
  }
  return "unknown";
}

void Sandbox::MoveLocked(SandboxState from, SandboxState to) {
  watch_->state.store(to);
  kSandboxLog.Debug("sandbox {}: {} -> {}", p_.id, SandboxStateName(from), SandboxStateName(to));
}

Status Sandbox::PauseVm() {
  std::lock_guard lock(stop_mu_);
  const SandboxState now = state();
  if (now == SandboxState::kPaused) return Status::Ok();
  if (now != SandboxState::kReady || vm_gone())
    return FailedPrecondition(fmt::format("sandbox {} is {}{}: it cannot pause", p_.id, SandboxStateName(now),
                                          vm_gone() ? " and its VM is gone" : ""))
        .WithReason(reason::kWrongState);
  RETURN_IF_ERROR_CTX(vm_->vmm().Pause(), "pause VM " + vm_id_);
  MoveLocked(now, SandboxState::kPaused);
  return Status::Ok();
}

Status Sandbox::ResumeVm() {
  std::lock_guard lock(stop_mu_);
  const SandboxState now = state();
  if (now == SandboxState::kReady) return Status::Ok();
  if (now != SandboxState::kPaused || vm_gone())
    return FailedPrecondition(fmt::format("sandbox {} is {}{}: it cannot resume", p_.id, SandboxStateName(now),
                                          vm_gone() ? " and its VM is gone" : ""))
        .WithReason(reason::kWrongState);
  RETURN_IF_ERROR_CTX(vm_->vmm().Resume(), "resume VM " + vm_id_);
  MoveLocked(now, SandboxState::kReady);
  return Status::Ok();
}

Status Sandbox::Stop() {
  std::lock_guard lock(stop_mu_);
  if (state() == SandboxState::kStopped) return Status::Ok();
  // A container's removal still running after its delete's answer (CRI
  // deletes the containers just before it kills the holder) is let finish
  // first, as if the pod were not stopping (so its guest call is made and
  // not revoked): cut short, the guest keeps the container's files a while
  // longer and the host's unmounts wait for them as busy (13-53 ms measured
  // against the removal's own ~15 ms left).
  {
    std::unique_lock deletes_lock(deletes_mu_);
    deletes_done_.wait(deletes_lock, [this] { return deletes_in_flight_ == 0; });
  }
  MoveLocked(state(), SandboxState::kStopping);
  kSandboxLog.Info("stopping sandbox {} (VM {}, VMM pid {})", p_.id, vm_id_, vmm_pid_);
  // First end every call the shim's threads have in flight; the VM's own
  // stop then finds its agent closed and stops the VMM directly.
  if (agent_) agent_->Revoke();
  {
    // No hook fires once the handle is revoked, so no thread starts after this.
    std::lock_guard fail_lock(fail_mu_);
    if (fail_thread_.joinable()) fail_thread_.join();
  }
  // A sandbox stops once its last container is gone (or the shim is
  // exiting): the guest holds nothing that needs flushing (files live on
  // the host, and virtio-fs writes through), so QEMU quits at once instead
  // of waiting for an ACPI power-off, as a runc pod's stop kills its pause.
  // The OOM watch and port-forward end after the quit, not before it: with
  // the agent revoked and the VM gone neither has anything left to wait for
  // (they took ~20 ms of every stop when they went first).
  // The pod's taps and tc redirects go beside the VMM's exit, not after it
  // (20-30 ms): deleting a tap the quitting QEMU still holds detaches it.
  std::thread network_down;
  if (network_) {
    try {
      network_down = std::thread([net = std::move(network_)]() mutable { net.reset(); });
    } catch (const std::system_error& e) {
      kSandboxLog.Warn("{}: no thread for the network's removal ({}); it went on this one", label_, e.what());
    }
  }
  Status st = vm_->Stop(std::chrono::milliseconds(0));
  if (!st.ok()) kSandboxLog.Error("stop VM {}: {}", vm_id_, st.ToString());
  if (oom_thread_.joinable()) oom_thread_.join();
  if (port_forward_) {
    if (Status pf = port_forward_->Stop(); !pf.ok()) kSandboxLog.Warn("{}: {}", label_, pf.ToString());
  }
  {
    std::lock_guard unplug_lock(unplug_mu_);  // their waits ended with the VMM's QMP connection
    unplugs_closed_ = true;
    for (auto& t : unplugs_) t.join();
    unplugs_.clear();
  }
  if (network_down.joinable()) network_down.join();
  cgroup_.reset();   // empty now
  MoveLocked(SandboxState::kStopping, SandboxState::kStopped);
  return st;
}

Sandbox::DeleteInFlight::DeleteInFlight(std::shared_ptr<Sandbox> sandbox) : sandbox_(std::move(sandbox)) {
  std::lock_guard lock(sandbox_->deletes_mu_);
  ++sandbox_->deletes_in_flight_;
}

Sandbox::DeleteInFlight::~DeleteInFlight() {
  if (!sandbox_) return;  // moved from
  {
    std::lock_guard lock(sandbox_->deletes_mu_);
    --sandbox_->deletes_in_flight_;
  }
  sandbox_->deletes_done_.notify_all();
  // Only now: the last reference's ~Sandbox (Stop) must find none in flight.
  sandbox_.reset();
}

void Sandbox::FailInBackground(const Status& why) {
  std::lock_guard lock(fail_mu_);
  if (fail_thread_.joinable() || watch_->Stopping()) return;
  watch_->failed.store(true);
  kSandboxLog.Error("sandbox {}: {}; stopping VM {} (VMM pid {})", p_.id, why.message(), vm_id_, vmm_pid_);
  fail_thread_ = std::thread([this] {
    agent_->Revoke();  // the pod's other calls in flight end now, not at their deadlines
    // The VMM only: the share, virtiofsd and the vsock host end stay until
    // containerd deletes the pod's tasks (Stop), as after a crash.
    if (Status st = vm_->vmm().Stop(std::chrono::milliseconds(0)); !st.ok())
      kSandboxLog.Error("sandbox {}: stop the VMM of VM {}: {}", p_.id, vm_id_, st.ToString());
    watch_->gone.store(true);
  });
}

Result<std::string> Sandbox::PlugDisk(const std::string& image) {
  const std::string serial = fmt::format("disk{}", next_disk_.fetch_add(1));
  UniqueFd fd(::open(image.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return ErrnoStatus(fmt::format("{}: open disk image {}", label_, image));
  RETURN_IF_ERROR_CTX(vm_->vmm().HotplugDevice(hypervisor::BlockDevice{serial, image, serial, false, fd.get()}),
                      label_);
  return serial;
}

void Sandbox::UnplugDiskLater(const std::string& serial) {
  if (watch_->Stopping() || vm_gone()) return;  // goes with the VM
  std::lock_guard lock(unplug_mu_);
  if (unplugs_closed_) return;  // Stop() ran meanwhile
  unplugs_.emplace_back([this, serial] {
    Status st = vm_->vmm().UnplugDevice(serial, kDiskUnplugTimeout);
    if (!st.ok() && !watch_->Stopping()) kSandboxLog.Warn("{}: {}", label_, st.ToString());
  });
}

Sandbox::~Sandbox() { (void)Stop(); }

}  // namespace capsule::shim::pod
