// Launch: state dir + ownership lock -> QMP listening socket -> QEMU spawned
// as a daemon (double fork + setsid, not QEMU's -daemonize, which forks after
// -sandbox spawn=deny is active and dies of SIGSYS) -> vm.json -> QMP
// handshake, watching QEMU's pidfd so an early exit fails the launch at once
// with QEMU's own message -> cont. Any failure kills QEMU and removes files.
// Attach: lock -> vm.json -> pidfd of the very same process -> QMP.
#include "runtime/hypervisor/qemu_hypervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <linux/capability.h>
#include <unistd.h>

#include <cstring>

#include "runtime/common/daemon.h"
#include "runtime/common/file_util.h"
#include "runtime/common/unix_listen.h"
#include "runtime/common/logging.h"
#include "runtime/hypervisor/qemu_cmdline.h"
#include "runtime/hypervisor/qemu_vm.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"

namespace capsule::hypervisor {
namespace {

using std::chrono::milliseconds;
const log::Logger kLog("hypervisor");

constexpr milliseconds kProbeTimeout{10000};
constexpr size_t kLogTailBytes = 2048;
constexpr int kExitConfirmMs = 2000;
// A VM handed over (the pool's claim) may still look locked for a moment
// (see VmLock::Acquire); one that another process really drives stays so.
constexpr milliseconds kAttachLockWait{500};

// QMP's socket: a stale one from a VM that is gone is ours to replace (we hold the lock).
Result<UniqueFd> ListenQmp(const std::string& path) {
  UnixListenOptions o;
  o.backlog = 4;
  o.existing = UnixListenOptions::Existing::kReplace;
  return ListenUnix(path, o);
}

std::string Joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    s += a.find_first_of(" \"'") == std::string::npos ? a : "'" + a + "'";
  }
  return s;
}

// Kills a half-launched QEMU and removes the VMM's files unless dismissed.
// Owns QEMU's pidfd until then, so the kill can never miss or hit a stranger.
class LaunchRollback {
 public:
  LaunchRollback(const VmPaths& paths, const std::string& console_log, VmLock& lock)
      : paths_(paths), console_log_(console_log), lock_(lock) {}
  ~LaunchRollback() {
    if (dismissed_) return;
    if (pidfd_) {
      (void)PidfdSignal(pidfd_.get(), SIGKILL);
      (void)PidfdWait(pidfd_.get(), 10000);
    }
    (void)RemoveVmmFiles(paths_, console_log_, lock_);
  }
  void Own(UniqueFd pidfd) { pidfd_ = std::move(pidfd); }
  int pidfd() const { return pidfd_.get(); }
  UniqueFd Dismiss() {
    dismissed_ = true;
    return std::move(pidfd_);
  }

 private:
  const VmPaths& paths_;
  const std::string& console_log_;
  VmLock& lock_;
  UniqueFd pidfd_;
  bool dismissed_ = false;
};

// QEMU's own words about a failed start, appended to the error.
Status WithVmmLog(Status st, const VmPaths& paths) {
  std::string tail = ReadLogTail(paths.vmm_log(), kLogTailBytes);
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  if (tail.empty()) return st;
  return Status(st.code(), st.message() + "; QEMU said: " + tail);
}

VmState StateFromQmp(const nlohmann::json& status) {
  auto it = status.find("status");
  bool running = it != status.end() && it->is_string() && it->get<std::string>() == "running";
  return running ? VmState::kRunning : VmState::kPaused;
}

// unshare(CLONE_NEWNET) needs CAP_SYS_ADMIN in the effective set, which
// root in an unprivileged container lacks.
bool HaveCapSysAdmin() {
  auto status = ReadFile("/proc/self/status");
  if (!status.ok()) return false;
  const size_t at = status->find("\nCapEff:");
  if (at == std::string::npos) return false;
  const uint64_t eff = std::strtoull(status->c_str() + at + 8, nullptr, 16);
  return (eff >> CAP_SYS_ADMIN & 1) != 0;
}

// Binds QMP's socket, opens QEMU's log and starts QEMU holding both.
Result<Daemon> SpawnQemu(QemuCommandInput in, const VmPaths& paths, std::string_view why) {
  ASSIGN_OR_RETURN(UniqueFd listener, ListenQmp(paths.qmp_socket()));
  UniqueFd log_fd(::open(paths.vmm_log().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640));
  if (!log_fd) return ErrnoStatus("open " + paths.vmm_log());
  in.qmp_listen_fd = listener.get();
  DaemonOptions d;
  d.argv = BuildQemuCommandLine(in);
  d.stdout_fd = log_fd.get();
  d.stderr_fd = log_fd.get();
  d.keep_fds = {listener.get()};
  if (in.spec.memory_fd >= 0) d.keep_fds.push_back(in.spec.memory_fd);  // the guest's RAM (a clone's copy)
  // QEMU needs no network of its own: NICs come as tap fds over QMP, every
  // other device is a unix socket by path. In an empty netns a compromised
  // VMM cannot reach the host's network, and a tool that configures "the
  // task's pid's netns" (ctr run --cni) cannot change the host's.
  d.new_net_namespace = HaveCapSysAdmin();
  if (!d.new_net_namespace)
    kLog.Warn("VM {}: no CAP_SYS_ADMIN, so QEMU shares this process's network namespace", in.spec.id);
  kLog.Info("launch VM {} ({}{}): {}", in.spec.id, why, d.new_net_namespace ? ", private netns" : "",
            Joined(d.argv));
  return SpawnDaemon(d);  // our copies of the socket and log close here
}

// Waits for QMP while watching QEMU's pidfd; an early exit carries QEMU's log.
Result<std::unique_ptr<QmpClient>> AwaitQmp(const VmPaths& paths, int pidfd, const std::string& vm_id,
                                            milliseconds timeout) {
  QmpClient::Options qo;
  qo.handshake_timeout = timeout;
  qo.abort_fd = pidfd;
  qo.peer = "VM " + vm_id;
  auto qmp = QmpClient::Connect(paths.qmp_socket(), qo);
  if (qmp.ok()) return qmp;
  // A reset or closed socket means QEMU is on its way out; its pidfd
  // confirms it a moment later.
  if (qmp.status().code() == Code::kUnavailable && PidfdWait(pidfd, kExitConfirmMs))
    return WithVmmLog(Unavailable("QEMU exited during start-up"), paths);
  return WithVmmLog(qmp.status(), paths);
}

}  // namespace

QemuHypervisor::QemuHypervisor(config::Config config, QemuHypervisorOptions options)
    : config_(std::move(config)), options_(std::move(options)) {}

HypervisorPtr NewQemuHypervisor(const config::Config& config) { return std::make_unique<QemuHypervisor>(config); }

Result<QemuCapabilities> QemuHypervisor::Capabilities() {
  std::lock_guard lock(mu_);
  if (!caps_) {
    if (options_.capabilities) {
      caps_ = options_.capabilities;
    } else {
      std::string cache = config_.runtime.state_dir + "/qemu-capabilities.json";
      ASSIGN_OR_RETURN(caps_, ProbeQemuCached(config_.hypervisor.path, cache, kProbeTimeout));
    }
  }
  return *caps_;
}

Result<AccelDecision> QemuHypervisor::ResolveAccelerator(std::optional<config::Accelerator> requested) {
  KvmFacts facts;
  {
    std::lock_guard lock(mu_);
    if (!facts_) facts_ = options_.kvm_facts ? *options_.kvm_facts : GatherKvmFacts();
    facts = *facts_;
  }
  auto d = DecideAccelerator(requested.value_or(config_.hypervisor.accelerator), facts);
  std::lock_guard lock(mu_);
  if (d.ok() && d->degraded && !warned_degraded_) {
    kLog.Warn("!!! {} !!!", d->reason);
    warned_degraded_ = true;
  }
  return d;
}

Result<VmPtr> QemuHypervisor::Launch(const VmSpec& spec_in) {
  auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(ValidateVmSpec(spec_in));
  VmSpec spec = spec_in;
  if (spec.incoming) spec.start_paused = true;  // nothing to run before LoadState
  VmPaths paths(spec.state_dir);
  if (spec.console_log.empty()) spec.console_log = paths.console_log();
  std::string what = "launch VM " + spec.id;
  ASSIGN_OR_RETURN(AccelDecision accel, ResolveAccelerator(spec.accelerator));
  ASSIGN_OR_RETURN(QemuCapabilities caps, Capabilities());
  bool sandbox = config_.hypervisor.seccomp_sandbox && caps.sandbox;
  if (config_.hypervisor.seccomp_sandbox && !caps.sandbox)
    kLog.Warn("QEMU {} has no -sandbox support; VM {} runs without seccomp", caps.version, spec.id);

  RETURN_IF_ERROR_CTX(MkdirAll(paths.dir, 0750), what);
  auto lock = VmLock::Acquire(paths.lock(), /*create=*/true);
  if (!lock.ok()) return lock.status().WithContext(what);
  if (PathExists(paths.record()))
    return AlreadyExists(fmt::format("{}: {} already describes a VM (running or not cleaned up)", what, paths.record()));
  LaunchRollback rollback(paths, spec.console_log, *lock);

  auto daemon = SpawnQemu(QemuCommandInput{&config_.hypervisor, spec, accel.accelerator, sandbox, -1}, paths, accel.reason);
  if (!daemon.ok()) return daemon.status().WithContext(what);
  rollback.Own(std::move(daemon->pidfd));
  VmRecord record{"qemu", spec, accel.accelerator, {}, config_.hypervisor.path, caps.version, paths.qmp_socket(), paths.vmm_log(), {}};
  record.spec.memory_fd = -1;  // meaningful to this launch only
  auto identity = IdentifyProcess(daemon->pid);
  if (!identity.ok()) return WithVmmLog(Unavailable(what + ": QEMU exited during start-up"), paths);
  record.vmm = *identity;
  RETURN_IF_ERROR_CTX(WriteFileAtomic(paths.record(), VmRecordToJson(record), 0600), what);

  auto qmp = AwaitQmp(paths, rollback.pidfd(), spec.id, options_.qmp_ready_timeout);
  if (!qmp.ok()) return qmp.status().WithContext(what);
  auto ready = std::chrono::steady_clock::now();
  QemuVm::Parts parts{std::move(record), std::move(*lock), rollback.Dismiss(), std::move(*qmp), VmState::kPaused, {}};
  auto vm = std::make_unique<QemuVm>(std::move(parts));
  if (!spec.start_paused) RETURN_IF_ERROR_CTX(vm->Resume(), what);  // vm's destructor cleans up
  kLog.Info("VM {} up: QEMU pid {}, QMP ready in {} ms", spec.id, vm->vmm_pid(),
            std::chrono::duration_cast<milliseconds>(ready - start).count());
  return VmPtr(std::move(vm));
}

Result<VmPtr> QemuHypervisor::Attach(const std::string& state_dir) {
  VmPaths paths(state_dir);
  std::string what = "attach VM at " + state_dir;
  auto lock = VmLock::Acquire(paths.lock(), /*create=*/false, kAttachLockWait);
  if (!lock.ok()) return lock.status().WithContext(what);
  auto text = ReadFile(paths.record());
  if (!text.ok()) return text.status().WithContext(what);
  ASSIGN_OR_RETURN(VmRecord record, VmRecordFromJson(*text, paths.record()));
  if (record.hypervisor != name())
    return FailedPrecondition(fmt::format("{}: VM runs under '{}', not qemu", what, record.hypervisor));
  if (record.spec.state_dir != state_dir)
    return FailedPrecondition(fmt::format("{}: vm.json names state dir {}", what, record.spec.state_dir));

  QemuVm::Parts parts{std::move(record), std::move(*lock), {}, nullptr, VmState::kPaused, {}};
  auto pidfd = OpenProcess(parts.record.vmm);
  if (!pidfd.ok()) {
    kLog.Warn("{}: {}; adopting it as exited", what, pidfd.status().message());
    VmExit e;
    e.reason = "QEMU exited while no driver was attached (" + pidfd.status().message() + ")";
    e.console_tail = ReadLogTail(parts.record.spec.console_log, 4096);
    e.vmm_log_tail = ReadLogTail(paths.vmm_log(), 4096);
    parts.exited = std::move(e);
    return VmPtr(std::make_unique<QemuVm>(std::move(parts)));
  }
  QmpClient::Options qo;
  qo.handshake_timeout = options_.qmp_ready_timeout;
  qo.abort_fd = pidfd->get();
  qo.peer = "VM " + parts.record.spec.id;
  auto qmp = QmpClient::Connect(parts.record.qmp_socket, qo);
  if (!qmp.ok()) return qmp.status().WithContext(what);
  auto status = (*qmp)->Execute("query-status");
  if (!status.ok()) return status.status().WithContext(what);
  parts.state = StateFromQmp(*status);
  parts.pidfd = std::move(*pidfd);
  parts.qmp = std::move(*qmp);
  kLog.Info("attached VM {} (QEMU pid {}, {})", parts.record.spec.id, parts.record.vmm.pid, VmStateName(parts.state));
  return VmPtr(std::make_unique<QemuVm>(std::move(parts)));
}

}  // namespace capsule::hypervisor
