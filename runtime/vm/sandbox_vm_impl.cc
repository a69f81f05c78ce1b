// SandboxVmImpl: accessors, and the one tear-down path. Stop: the agent is
// asked to power the guest off (DestroySandbox{power_off}) while we wait up
// to `graceful` for the VMM to exit; then the client is closed (cancelling
// the request if the guest hangs), the VMM stopped, virtiofsd and the vsock
// host end stopped, and the state dir removed. Every step runs even when an
// earlier one failed; the first error is returned.
#include "runtime/vm/sandbox_vm_impl.h"

#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <future>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/host/background_close.h"
#include "runtime/vm/vm_dir.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
const log::Logger kSandboxVmImplLog("vm");

// SIGTERM -> SIGKILL grace for virtiofsd and capsule-vsockd; both normally
// exit by themselves when QEMU disconnects.
constexpr milliseconds kDaemonGrace{2000};

std::string Join(std::string_view base, std::string_view rel) {
  std::string out(base);
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  if (!rel.empty()) out += "/" + std::string(rel);
  return out;
}

}  // namespace

SandboxVmImpl::SandboxVmImpl(std::string id, std::string state_dir)
    : id_(std::move(id)),
      state_dir_(std::move(state_dir)),
      log_guard_(std::make_unique<LogGuard>(id_, LogGuard::GuestWritableLogs(state_dir_))) {}

SandboxVmImpl::~SandboxVmImpl() {
  Status st = Stop(milliseconds(0));
  if (!st.ok() && st.code() != Code::kFailedPrecondition)
    kSandboxVmImplLog.Error("VM {}: clean-up on destruction failed: {}", id_, st.ToString());
}

std::string_view SandboxVmImpl::StateName(State s) {
  switch (s) {
    case State::kRunning: return "running";
    case State::kStopped: return "stopped";
    case State::kDetached: return "detached";
  }
  return "unknown";
}

hypervisor::Accelerator SandboxVmImpl::accelerator() const {
  return vmm_ ? vmm_->accelerator() : hypervisor::Accelerator::kTcg;
}

bool SandboxVmImpl::VmmRunning() const {
  if (!vmm_) return false;
  auto s = vmm_->state();
  return s == hypervisor::VmState::kRunning || s == hypervisor::VmState::kPaused;
}

std::vector<pid_t> SandboxVmImpl::HostPids() const {
  std::vector<pid_t> out;
  if (pid_t p = vmm_pid(); p > 0) out.push_back(p);
  // Both daemons record their pids in the state dir (adopted VMs too).
  for (const std::string& f : {virtiofs::VirtiofsPaths(state_dir_).pidfile(),
                               state_dir_ + "/" + std::string(vsock::kVsockdPidName)}) {
    auto text = ReadFile(f);
    if (!text.ok()) continue;
    const long pid = std::strtol(text->c_str(), nullptr, 10);
    if (pid > 0) out.push_back(static_cast<pid_t>(pid));
  }
  return out;
}

std::optional<BootNic> SandboxVmImpl::boot_nic() const {
  if (!vmm_ || vmm_pid() <= 0) return std::nullopt;
  for (const hypervisor::Device& d : vmm_->boot_devices()) {
    const auto* n = std::get_if<hypervisor::NetDevice>(&d);
    if (n == nullptr || n->id != kBootNicDeviceId) continue;
    return BootNic{n->id, n->tap_name, n->mac, fmt::format("/proc/{}/ns/net", vmm_pid())};
  }
  return std::nullopt;
}

Result<agentclient::AgentClient*> SandboxVmImpl::agent() {
  std::lock_guard lock(mu_);
  if (state_ != State::kRunning)
    return FailedPrecondition(fmt::format("VM {} is {}: no agent", id_, StateName(state_)));
  if (!vmm_ && !agent_error_.ok()) return agent_error_;  // a boot that never finished (adopt.cc)
  if (!VmmRunning()) return FailedPrecondition(fmt::format("VM {} has exited: no agent", id_));
  if (!agent_) return agent_error_.ok() ? Unavailable(fmt::format("VM {}: no agent connection", id_)) : agent_error_;
  return agent_.get();
}

std::string SandboxVmImpl::HostSharedPath(std::string_view rel) const {
  return Join(virtiofs::VirtiofsPaths(state_dir_).host_tree(), rel);
}

std::string SandboxVmImpl::GuestSharedPath(std::string_view rel) const {
  return Join(guest_abi::kSharedFsGuestPath, rel);
}

agent::v1::Storage SandboxVmImpl::SharedFsStorage() const {
  agent::v1::Storage s;
  s.set_driver("virtiofs");
  s.set_source(std::string(guest_abi::kSharedFsTag));
  s.set_fstype("virtiofs");
  s.set_mount_point(std::string(guest_abi::kSharedFsGuestPath));
  return s;
}

Result<UniqueFd> SandboxVmImpl::DialGuest(uint32_t port, milliseconds timeout) {
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kRunning || !vsock_)
      return FailedPrecondition(fmt::format("VM {} is {}: cannot dial guest port {}", id_, StateName(state_), port));
  }
  auto fd = vsock_->Dial(port, timeout);
  if (!fd.ok()) return fd.status().WithContext(fmt::format("VM {}: dial guest vsock port {}", id_, port));
  return fd;
}

void SandboxVmImpl::OnExit(ExitCallback callback) {
  if (vmm_) vmm_->OnExit(std::move(callback));
}

Status SandboxVmImpl::PowerOffGuest(milliseconds graceful) {
  // The request runs on its own thread while the VMM driver waits for the
  // exit (so it reports it as the stop it asked for), then quits or kills
  // QEMU if the guest hung; Close() then cancels a request still pending.
  agentclient::AgentClient* client = agent_.get();
  auto destroy = std::async(std::launch::async, [client] {
    agent::v1::DestroySandboxRequest req;
    req.set_power_off(true);
    return client->DestroySandbox(req);
  });
  auto t0 = std::chrono::steady_clock::now();
  Status stopped = vmm_->Stop(graceful);
  auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  agent_->Close();
  Status st = destroy.get();
  if (!st.ok() && st.code() != Code::kCancelled) kSandboxVmImplLog.Warn("VM {}: DestroySandbox: {}", id_, st.message());
  kSandboxVmImplLog.Info("VM {}: VMM gone {} ms after DestroySandbox(power_off) ({})", id_, took.count(),
                         took < graceful ? "the guest powered off" : "the guest did not power off in time");
  return stopped;
}

Status SandboxVmImpl::Stop(milliseconds graceful) {
  std::lock_guard op(op_mu_);
  {
    std::lock_guard lock(mu_);
    if (state_ == State::kStopped) return Status::Ok();
    if (state_ == State::kDetached) return FailedPrecondition(fmt::format("cannot stop VM {} in state detached", id_));
  }
  Status powered_off;
  if (graceful.count() > 0 && agent_ && VmmRunning()) powered_off = PowerOffGuest(graceful);
  Status st = TearDown();
  if (st.ok() && !powered_off.ok()) st = std::move(powered_off).WithContext("stop VM " + id_);
  std::lock_guard lock(mu_);
  state_ = State::kStopped;
  return st;
}

Status SandboxVmImpl::TearDown() {
  Status first;
  auto note = [&](Status st, std::string_view what) {
    if (st.ok()) return;
    kSandboxVmImplLog.Warn("VM {}: {}: {}", id_, what, st.message());
    if (first.ok()) first = std::move(st).WithContext(fmt::format("stop VM {}: {}", id_, what));
  };
  log_guard_.reset();
  if (agent_) agent_->Close();
  // Freed after the stop instead of in QEMU's exit, or in virtiofsd's or
  // vsockd's, whichever unmaps the guest's RAM last.
  std::vector<UniqueFd> ram = vmm_ ? vmm_->ReferenceGuestRam() : std::vector<UniqueFd>{};
  if (vmm_) note(vmm_->Stop(milliseconds(0)), "stop the VMM");
  if (virtiofsd_) {
    note(virtiofsd_->Stop(kDaemonGrace), "stop virtiofsd");
  } else {
    // Adopted without a daemon to attach to: the share mounts may remain.
    const virtiofs::VirtiofsPaths paths(state_dir_);
    auto share = virtiofs::SharedMount::Adopt(paths.host_tree(), paths.share());
    if (share.ok()) note(share->Release(), "unmount the share");
  }
  if (vsock_) note(vsock_->Shutdown(kDaemonGrace), "stop the vsock host end");
  note(RemoveAll(state_dir_), "remove the state dir");
  for (UniqueFd& fd : ram) CloseInBackground(std::move(fd));
  if (first.ok()) kSandboxVmImplLog.Info("VM {} stopped; {} removed", id_, state_dir_);
  return first;
}

Status SandboxVmImpl::Detach() {
  std::lock_guard op(op_mu_);
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kRunning)
      return FailedPrecondition(fmt::format("cannot detach VM {} in state {}", id_, StateName(state_)));
  }
  if (!vmm_) return FailedPrecondition(fmt::format("cannot detach VM {}: it has no VMM", id_));
  RETURN_IF_ERROR_CTX(vmm_->Detach(), "detach VM " + id_);
  log_guard_.reset();  // the next owner bounds the logs
  if (agent_) agent_->Close();  // a gRPC stream cannot be handed over
  if (virtiofsd_) virtiofsd_->Detach();
  if (vsock_) vsock_->Detach();
  std::lock_guard lock(mu_);
  state_ = State::kDetached;
  kSandboxVmImplLog.Info("VM {} detached (QEMU pid {}); adopt it from {}", id_, vmm_->vmm_pid(), state_dir_);
  return Status::Ok();
}

}  // namespace capsule::vm
