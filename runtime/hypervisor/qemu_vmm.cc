// QemuVmm lifecycle:
//   kPaused <-> kRunning      Pause()/Resume() (QMP stop/cont)
//   kPaused|kRunning -> kStopping -> kExited     Stop()
//   any live state -> kExited                    the VMM died (watch thread)
//   kPaused|kRunning|kExited -> kDetached        Detach()
// Stopping escalates: system_powerdown (running guests only), quit, SIGKILL.
#include "runtime/hypervisor/qemu_vmm.h"

#include <fmt/format.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/unix_stream.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/qemu_cmdline.h"
#include "runtime/hypervisor/qemu_devices.h"

namespace capsule::hypervisor {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const log::Logger kQemuVmmLog("hypervisor");

// After `quit`, QEMU tears down devices and exits; give it this long.
constexpr milliseconds kQuitGrace{3000};
// After SIGKILL the kernel needs only to reap memory; bound it anyway.
constexpr milliseconds kKillGrace{10000};
// When the VMM dies, QMP delivers its last events (SHUTDOWN) as the socket
// closes; wait this long for them before reporting the exit.
constexpr milliseconds kLastEventsGrace{1000};
constexpr size_t kTailBytes = 4096;

}  // namespace

std::string_view VmStateName(VmState s) {
  switch (s) {
    case VmState::kRunning: return "running";
    case VmState::kPaused: return "paused";
    case VmState::kStopping: return "stopping";
    case VmState::kExited: return "exited";
    case VmState::kDetached: return "detached";
  }
  return "unknown";
}

std::string VmExit::Describe(std::string_view vm_id) const {
  std::string s = fmt::format("VM {} {}: {}", vm_id, requested ? "stopped" : "exited unexpectedly", reason);
  if (!console_tail.empty()) s += "\n--- console tail ---\n" + console_tail;
  if (!vmm_log_tail.empty()) s += "\n--- QEMU log tail ---\n" + vmm_log_tail;
  return s;
}

QemuVmm::QemuVmm(Parts parts)
    : paths_(parts.record.spec.state_dir),
      pidfd_(std::move(parts.pidfd)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      qmp_(std::move(parts.qmp)),
      lock_(std::move(parts.lock)),
      record_(std::move(parts.record)),
      state_(parts.state),
      exit_(std::move(parts.exited)) {
  if (exit_) state_ = VmState::kExited;
  if (qmp_) qmp_->Subscribe([this](const QmpEvent& e) { OnQmpEvent(e); });
  if (pidfd_ && !exit_) watcher_ = std::thread([this] { WatchLoop(); });
}

QemuVmm::~QemuVmm() {
  if (state() != VmState::kDetached) {
    Status st = Stop(milliseconds(0));
    if (!st.ok()) kQemuVmmLog.Error("{}: cleanup on destruction failed: {}", Who(), st.ToString());
  }
  // Even if Stop() gave up half-way, no thread may outlive the members it
  // uses: the QMP reader calls OnQmpEvent, the watcher HandleVmmExit.
  StopWatcher();
  if (qmp_) qmp_->Close();
}

VmState QemuVmm::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

Status QemuVmm::CheckOp(std::string_view op, std::initializer_list<VmState> allowed) const {
  VmState s = state();
  for (VmState a : allowed) {
    if (s == a) return Status::Ok();
  }
  return FailedPrecondition(fmt::format("cannot {} {} in state {}", op, Who(), VmStateName(s)));
}

void QemuVmm::OnQmpEvent(const QmpEvent& e) {
  std::lock_guard lock(mu_);
  if (e.name == "SHUTDOWN") {
    auto it = e.data.find("reason");
    shutdown_reason_ = (it != e.data.end() && it->is_string()) ? it->get<std::string>() : "shutdown";
  } else if (e.name == "STOP" && state_ == VmState::kRunning) {
    state_ = VmState::kPaused;
  } else if (e.name == "RESUME" && state_ == VmState::kPaused) {
    state_ = VmState::kRunning;
  }
}

void QemuVmm::WatchLoop() {
  pollfd p[2] = {{pidfd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  for (;;) {
    int r = ::poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return;
    // The exit wins over a concurrent wake-up so it is always reported.
    if ((p[0].revents & POLLIN) != 0) return HandleVmmExit();
    if ((p[1].revents & POLLIN) != 0) return;
  }
}

VmExit QemuVmm::BuildExit(bool requested) {
  VmExit e;
  e.requested = requested;
  std::string reason;
  {
    std::lock_guard lock(mu_);
    reason = shutdown_reason_;
  }
  e.reason = reason.empty() ? "QEMU exited without a SHUTDOWN event (killed or crashed)" : "QEMU shut down: " + reason;
  e.console_tail = ReadLogTail(record_.spec.console_log, kTailBytes);
  e.vmm_log_tail = ReadLogTail(paths_.vmm_log(), kTailBytes);
  return e;
}

// Runs on the watch thread; invoking the callbacks is the last thing it does.
void QemuVmm::HandleVmmExit() {
  if (qmp_) qmp_->WaitClosed(kLastEventsGrace);
  bool requested;
  {
    std::lock_guard lock(mu_);
    requested = stop_requested_;
  }
  VmExit e = BuildExit(requested);
  if (requested) {
    kQemuVmmLog.Info("VM {} stopped ({})", record_.spec.id, e.reason);
  } else {
    kQemuVmmLog.Error("{}", e.Describe(record_.spec.id));
  }
  FinishExit(std::move(e));
}

void QemuVmm::FinishExit(VmExit e) {
  std::vector<ExitCallback> callbacks;
  {
    std::lock_guard lock(mu_);
    if (exit_) return;
    exit_ = e;
    state_ = VmState::kExited;
    callbacks.swap(callbacks_);
    cv_.notify_all();
  }
  for (auto& cb : callbacks) cb(e);
}

void QemuVmm::OnExit(ExitCallback callback) {
  std::unique_lock lock(mu_);
  if (exit_) {
    VmExit e = *exit_;
    lock.unlock();
    callback(e);
    return;
  }
  callbacks_.push_back(std::move(callback));
}

std::optional<VmExit> QemuVmm::WaitExit(std::optional<milliseconds> timeout) {
  std::unique_lock lock(mu_);
  auto done = [&] { return exit_.has_value() || state_ == VmState::kDetached; };
  if (timeout) {
    cv_.wait_for(lock, *timeout, done);
  } else {
    cv_.wait(lock, done);
  }
  return exit_;
}

std::vector<UniqueFd> QemuVmm::ReferenceGuestRam() const {
  constexpr off_t kMinRamBytes = off_t{1} << 20;
  std::vector<UniqueFd> refs;
  if (!pidfd_ || PidfdExited(pidfd_.get())) return refs;
  const std::string dir = fmt::format("/proc/{}/fd", record_.vmm.pid);
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dfd) return refs;
  for (const std::string& name : ListDir(dir)) {
    char target[64];
    ssize_t n = ::readlinkat(dfd.get(), name.c_str(), target, sizeof target);
    if (n <= 0 || std::string_view(target, static_cast<size_t>(n)).substr(0, 7) != "/memfd:") continue;
    UniqueFd ref(::openat(dfd.get(), name.c_str(), O_PATH | O_CLOEXEC));
    struct stat st{};
    if (!ref || ::fstat(ref.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < kMinRamBytes) continue;
    refs.push_back(std::move(ref));
  }
  // Read from a reused pid if the VMM exited meanwhile: none of it is ours.
  if (PidfdExited(pidfd_.get())) refs.clear();
  return refs;
}

Status QemuVmm::Pause() {
  std::lock_guard op(op_mu_);
  if (state() == VmState::kPaused) return Status::Ok();
  RETURN_IF_ERROR(CheckOp("pause", {VmState::kRunning}));
  RETURN_IF_ERROR_CTX(qmp_->Execute("stop").status(), "pause " + Who());
  std::lock_guard lock(mu_);
  state_ = VmState::kPaused;
  return Status::Ok();
}

Status QemuVmm::Resume() {
  std::lock_guard op(op_mu_);
  if (state() == VmState::kRunning) return Status::Ok();
  RETURN_IF_ERROR(CheckOp("resume", {VmState::kPaused}));
  RETURN_IF_ERROR_CTX(qmp_->Execute("cont").status(), "resume " + Who());
  std::lock_guard lock(mu_);
  state_ = VmState::kRunning;
  return Status::Ok();
}

void QemuVmm::StopWatcher() {
  if (!watcher_.joinable()) return;
  if (watcher_.get_id() == std::this_thread::get_id()) {
    // Destroyed from an exit callback: the thread is finishing anyway.
    watcher_.detach();
    return;
  }
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  watcher_.join();
}

// Escalates until the VMM is gone. Returns an error only if even SIGKILL
// did not end it.
Status QemuVmm::TerminateVmm(milliseconds graceful, bool guest_running) {
  int fd = pidfd_.get();
  // A paused guest cannot act on an ACPI power button.
  if (graceful.count() > 0 && guest_running && qmp_ && qmp_->connected()) {
    auto st = qmp_->Execute("system_powerdown");
    if (st.ok() && PidfdWait(fd, static_cast<int>(graceful.count()))) return Status::Ok();
    kQemuVmmLog.Info("{}: guest did not power off within {} ms; quitting QEMU", Who(), graceful.count());
  }
  if (qmp_ && qmp_->connected()) {
    (void)qmp_->Execute("quit", nullptr, kQuitGrace);
    if (PidfdWait(fd, static_cast<int>(kQuitGrace.count()))) return Status::Ok();
    kQemuVmmLog.Warn("{}: QEMU did not exit after quit; killing pid {}", Who(), record_.vmm.pid);
  }
  RETURN_IF_ERROR(PidfdSignal(fd, SIGKILL));
  if (!PidfdWait(fd, static_cast<int>(kKillGrace.count())))
    return Internal(fmt::format("{}: QEMU pid {} survived SIGKILL for {} ms", Who(), record_.vmm.pid, kKillGrace.count()));
  return Status::Ok();
}

Status QemuVmm::Stop(milliseconds graceful) {
  std::lock_guard op(op_mu_);
  VmState s = state();
  if (s == VmState::kDetached) return FailedPrecondition(fmt::format("cannot stop {} in state detached", Who()));
  {
    std::lock_guard lock(mu_);
    if (cleaned_) return Status::Ok();
    stop_requested_ = true;
    if (s != VmState::kExited) state_ = VmState::kStopping;
  }
  if (s != VmState::kExited && pidfd_) RETURN_IF_ERROR(TerminateVmm(graceful, s == VmState::kRunning));
  // The watch thread saw the exit and reported it, or (no thread) we do.
  StopWatcher();
  if (qmp_) qmp_->Close();
  FinishExit(BuildExit(true));
  {
    std::lock_guard lock(mu_);
    state_ = VmState::kExited;
    cleaned_ = true;
  }
  return RemoveVmmFiles(paths_, record_.spec.console_log, lock_).WithContext("clean up " + Who());
}

Status QemuVmm::Detach() {
  std::lock_guard op(op_mu_);
  RETURN_IF_ERROR(CheckOp("detach", {VmState::kRunning, VmState::kPaused}));
  StopWatcher();
  if (qmp_) qmp_->Close();
  lock_ = VmLock();  // released, file kept for the next owner
  std::lock_guard lock(mu_);
  state_ = VmState::kDetached;
  cv_.notify_all();
  kQemuVmmLog.Info("{} detached (QEMU pid {} keeps running; state in {})", Who(), record_.vmm.pid, paths_.dir);
  return Status::Ok();
}

std::vector<HotpluggedDevice> QemuVmm::hotplugged() const {
  std::lock_guard lock(mu_);
  return record_.hotplugged;
}

Status QemuVmm::PersistRecord() {
  std::string text;
  {
    std::lock_guard lock(mu_);
    text = VmRecordToJson(record_);
  }
  return WriteFileAtomic(paths_.record(), text, 0600, Durability::kVolatile);
}

Result<std::string> QemuVmm::FreePort() const {
  std::lock_guard lock(mu_);
  std::set<std::string> used;
  for (const auto& h : record_.hotplugged) used.insert(h.port);
  for (uint32_t i = 0; i < record_.spec.hotplug_slots; ++i) {
    std::string port = HotplugPortId(i);
    if (!used.count(port)) return port;
  }
  return ResourceExhausted(fmt::format("{}: all {} hot-plug slots are in use", Who(), record_.spec.hotplug_slots));
}

Status QemuVmm::RunSteps(const std::vector<QmpStep>& steps) {
  for (const QmpStep& step : steps) RETURN_IF_ERROR(qmp_->Execute(step.command, step.arguments).status());
  return Status::Ok();
}

// The VMM opens no path of ours (it may run as a user that cannot): a
// vhost-user device's socket is connected here, a kernel vsock's vhost fd
// comes from the caller, and each goes over with getfd.
Result<uint64_t> QemuVmm::PassDeviceFd(const Device& device) {
  if (const auto* b = std::get_if<BlockDevice>(&device)) {
    ASSIGN_OR_RETURN(json added, qmp_->ExecuteWithFd("add-fd", json::object(), b->fd));
    auto id = added.find("fdset-id");
    if (id == added.end() || !id->is_number_unsigned()) return Internal("add-fd answered no fdset-id: " + added.dump());
    return id->get<uint64_t>();
  }
  if (ConnectsSocket(device)) {
    const auto* fs = std::get_if<FsShare>(&device);
    const std::string& path = fs != nullptr ? fs->socket_path : std::get<VsockDevice>(device).socket_path;
    ASSIGN_OR_RETURN(UniqueFd sock, ConnectUnix(path, {.listen_wait = kVhostUserListenWait}));
    RETURN_IF_ERROR(qmp_->ExecuteWithFd("getfd", json{{"fdname", PassedFdName(device)}}, sock.get()).status());
    return uint64_t{0};
  }
  if (const auto* v = std::get_if<VsockDevice>(&device); v != nullptr && v->vhost_fd >= 0)
    RETURN_IF_ERROR(qmp_->ExecuteWithFd("getfd", json{{"fdname", PassedFdName(device)}}, v->vhost_fd).status());
  return uint64_t{0};
}

Status QemuVmm::HotplugDevice(const Device& device) {
  std::lock_guard op(op_mu_);
  std::string what = fmt::format("hot-plug {} device '{}' into {}", DeviceKind(device), DeviceId(device), Who());
  RETURN_IF_ERROR(CheckOp("hot-plug into", {VmState::kRunning, VmState::kPaused}));
  RETURN_IF_ERROR_CTX(ValidateDevice(device), what);
  {
    std::lock_guard lock(mu_);
    auto* vsock = std::get_if<VsockDevice>(&device);
    const bool vhost_user =
        std::holds_alternative<FsShare>(device) || (vsock != nullptr && vsock->backend == VsockDevice::Backend::kVhostUser);
    if (record_.spec.memory_private && vhost_user)
      return FailedPrecondition(what + ": a vhost-user back end cannot see a copy-on-write guest's RAM");
    if (vsock != nullptr && vsock->backend == VsockDevice::Backend::kSerial)
      return FailedPrecondition(what + ": a serial vsock is part of the VM from boot (it migrates with it); it is "
                                "not hot-pluggable");
    if (auto* b = std::get_if<BlockDevice>(&device); b != nullptr && b->fd < 0)
      return InvalidArgument(what + ": no image fd (the VMM opens no path)");
    if (std::holds_alternative<BlockDevice>(device) && !record_.spec.scsi_controller)
      return FailedPrecondition(what + ": the VM has no virtio-scsi controller for disks (VmSpec.scsi_controller)");
    auto* nic = std::get_if<NetDevice>(&device);
    if (nic != nullptr && nic->fd_name.empty() && record_.vmm_uid >= 0)
      return FailedPrecondition(fmt::format("{}: QEMU runs as uid {} and cannot make a tap; pass one (PassFd, "
                                            "fd_name)", what, record_.vmm_uid));
    bool taken = std::any_of(record_.spec.devices.begin(), record_.spec.devices.end(),
                             [&](const Device& d) { return DeviceId(d) == DeviceId(device); }) ||
                 std::any_of(record_.hotplugged.begin(), record_.hotplugged.end(),
                             [&](const HotpluggedDevice& h) { return DeviceId(h.device) == DeviceId(device); });
    if (taken) return AlreadyExists(what + ": the id is in use");
  }
  const bool block = std::holds_alternative<BlockDevice>(device);
  std::string port = kScsiBusId;
  if (!block) {
    ASSIGN_OR_RETURN(port, FreePort());
  }
  Result<uint64_t> fdset = PassDeviceFd(device);
  if (!fdset.ok()) return fdset.status().WithContext(what);
  if (Status st = RunSteps(BackendAddSteps(device, *fdset)); !st.ok()) {
    (void)RunSteps(PassedFdReleaseSteps(device, *fdset));
    return std::move(st).WithContext(what);
  }
  if (block) (void)RunSteps(PassedFdReleaseSteps(device, *fdset));  // the blockdev holds its own dup
  QmpStep add = DeviceAddStep(device, port);
  if (Status st = qmp_->Execute(add.command, add.arguments).status(); !st.ok()) {
    (void)RunSteps(BackendRemoveSteps(device));  // undo the back end
    if (!IsVhostUser(device) && !block) (void)RunSteps(PassedFdReleaseSteps(device));  // a vhost fd not taken
    return std::move(st).WithContext(what);
  }
  {
    std::lock_guard lock(mu_);
    record_.hotplugged.push_back({device, port});
  }
  kQemuVmmLog.Info("{} on {}", what, port);
  return PersistRecord().WithContext(what + ": record it");
}

Status QemuVmm::UnplugDevice(const std::string& device_id, milliseconds timeout) {
  std::string what = fmt::format("unplug device '{}' from {}", device_id, Who());
  std::optional<Device> device;
  std::shared_ptr<QmpClient::EventWaiter> deleted;
  {
    std::lock_guard op(op_mu_);
    RETURN_IF_ERROR(CheckOp("unplug from", {VmState::kRunning, VmState::kPaused}));
    {
      std::lock_guard lock(mu_);
      for (const auto& h : record_.hotplugged) {
        if (DeviceId(h.device) == device_id) device = h.device;
      }
      for (const auto& d : record_.spec.devices) {
        if (DeviceId(d) == device_id) return FailedPrecondition(what + ": attached at boot, not hot-pluggable");
      }
    }
    if (!device) return NotFound(what + ": no such hot-plugged device");
    deleted = qmp_->Expect("DEVICE_DELETED", [device_id](const json& data) {
      auto it = data.find("device");
      return it != data.end() && it->is_string() && it->get<std::string>() == device_id;
    });
    RETURN_IF_ERROR_CTX(qmp_->Execute("device_del", json{{"id", device_id}}).status(), what);
  }
  // The guest takes its time (a PCIe hot-unplug waits out pciehp's 5 s
  // attention-button delay; a SCSI disk goes at once): other operations,
  // Stop above all, go on meanwhile; a Stop ends this wait (the QMP
  // connection closes).
  auto ev = deleted->Wait(timeout);
  if (!ev.ok()) return ev.status().WithContext(what + " (the guest did not release it)");
  std::lock_guard op(op_mu_);
  RETURN_IF_ERROR(CheckOp("unplug from", {VmState::kRunning, VmState::kPaused}));
  RETURN_IF_ERROR_CTX(RunSteps(BackendRemoveSteps(*device)), what);
  {
    std::lock_guard lock(mu_);
    std::erase_if(record_.hotplugged, [&](const HotpluggedDevice& h) { return DeviceId(h.device) == device_id; });
  }
  kQemuVmmLog.Info("{}: done", what);
  return PersistRecord().WithContext(what + ": record it");
}

Status QemuVmm::PassFd(const std::string& fd_name, int fd) {
  std::lock_guard op(op_mu_);
  std::string what = fmt::format("pass fd {} as '{}' to {}", fd, fd_name, Who());
  RETURN_IF_ERROR(CheckOp("pass an fd to", {VmState::kRunning, VmState::kPaused}));
  if (!IsValidFdName(fd_name))
    return InvalidArgument(what + ": fd name must match [A-Za-z][A-Za-z0-9_.-]{0,31}");
  RETURN_IF_ERROR_CTX(qmp_->ExecuteWithFd("getfd", json{{"fdname", fd_name}}, fd).status(), what);
  kQemuVmmLog.Info("{}: done", what);
  return Status::Ok();
}

}  // namespace capsule::hypervisor
