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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <linux/capability.h>
#include <unistd.h>

#include <cstring>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unix_stream.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/qemu_cmdline.h"
#include "runtime/hypervisor/qemu_devices.h"
#include "runtime/hypervisor/qemu_vmm.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"
#include "runtime/hypervisor/vmm_user.h"

namespace capsule::hypervisor {
namespace {

using std::chrono::milliseconds;
const log::Logger kQemuHypervisorLog("hypervisor");

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
  return st.WithMessage(st.message() + "; QEMU said: " + tail);
}

VmState StateFromQmp(const nlohmann::json& status) {
  auto it = status.find("status");
  bool running = it != status.end() && it->is_string() && it->get<std::string>() == "running";
  return running ? VmState::kRunning : VmState::kPaused;
}

// What QEMU is handed instead of opening paths itself: it may run as a uid
// of its own (vmm_user.h) that cannot reach the VM's state dir. Our copies
// of the fds close once QEMU runs.
class LaunchFds {
 public:
  explicit LaunchFds(DaemonOptions& d) : d_(d) {}
  int Keep(UniqueFd fd) {
    const int n = fd.get();
    d_.keep_fds.push_back(n);
    held_.push_back(std::move(fd));
    return n;
  }
  // A number the child replaces with a tap it makes (DaemonOptions::taps).
  Result<int> TapSlot(const std::string& tap_name) {
    UniqueFd slot(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!slot) return ErrnoStatus("open /dev/null");
    const int n = slot.get();
    d_.taps.push_back({tap_name, n});
    held_.push_back(std::move(slot));
    return n;
  }

 private:
  DaemonOptions& d_;
  std::vector<UniqueFd> held_;
};

const std::string& BackendSocket(const Device& d) {
  if (const auto* f = std::get_if<FsShare>(&d)) return f->socket_path;
  return std::get<VsockDevice>(d).socket_path;
}

// A template's RAM file (memory_file), made and sized here and owned by
// the VMM's user, which must open it read-write through /proc/self/fd.
Result<UniqueFd> OpenMemoryFile(const VmSpec& spec, const std::optional<VmmUser>& user) {
  const std::string& path = spec.memory_file;
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return ErrnoStatus("open guest RAM file " + path);
  const off_t size = static_cast<off_t>(spec.memory_mib) << 20;
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path);
  if (st.st_size != size && ::ftruncate(fd.get(), size) != 0) return ErrnoStatus("size " + path);
  if (user && ::fchown(fd.get(), user->uid, user->gid) != 0) return ErrnoStatus("hand " + path + " to the VMM's user");
  return fd;
}

// The agent token as a sealed memfd QEMU reopens through /proc/self/fd
// for fw_cfg (it takes no fd there): owned by the VMM's user, readable by it
// alone, and nothing on a command line.
Result<UniqueFd> AgentTokenFile(const std::string& token, const std::optional<VmmUser>& user) {
  UniqueFd fd(::memfd_create("capsule-agent-token", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return ErrnoStatus("memfd_create for the agent token");
  RETURN_IF_ERROR(WriteAll(fd.get(), token, "the agent token memfd"));
  if (user && ::fchown(fd.get(), user->uid, user->gid) != 0) return ErrnoStatus("hand the agent token to the VMM's user");
  if (::fchmod(fd.get(), 0400) != 0) return ErrnoStatus("chmod the agent token");
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
    return ErrnoStatus("seal the agent token");
  return fd;
}

// The fds of the boot devices: vhost-user sockets connected here, a kernel
// vsock's vhost fd from the caller, taps made in QEMU's netns by the child.
Status PassBootDevices(const VmSpec& spec, DaemonOptions& d, LaunchFds& fds, QemuCommandInput& in) {
  for (const Device& dev : spec.devices) {
    const std::string& id = DeviceId(dev);
    if (ConnectsSocket(dev)) {
      ASSIGN_OR_RETURN(UniqueFd sock, ConnectUnix(BackendSocket(dev), {.listen_wait = kVhostUserListenWait}));
      in.device_fds[id] = fds.Keep(std::move(sock));
    } else if (const auto* v = std::get_if<VsockDevice>(&dev); v != nullptr && v->vhost_fd >= 0) {
      d.keep_fds.push_back(v->vhost_fd);
      in.device_fds[id] = v->vhost_fd;
    } else if (const auto* n = std::get_if<NetDevice>(&dev); n != nullptr && d.new_net_namespace) {
      ASSIGN_OR_RETURN(in.device_fds[id], fds.TapSlot(n->tap_name));
    }
  }
  return Status::Ok();
}

// The kernel, initrd and firmware, opened here: a jailed QEMU cannot see
// their paths, and its uid may not be allowed to read them.
Status PassBootFiles(const VmSpec& spec, const config::HypervisorConfig& hv, LaunchFds& fds, QemuCommandInput& in) {
  auto open_ro = [&fds](const std::string& path, const char* what) -> Result<int> {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return ErrnoStatus(fmt::format("open the guest {} {}", what, path));
    return fds.Keep(std::move(fd));
  };
  if (!spec.kernel.empty()) {
    ASSIGN_OR_RETURN(in.kernel_fd, open_ro(spec.kernel, "kernel"));
  }
  if (!spec.kernel.empty() && !spec.initrd.empty()) {
    ASSIGN_OR_RETURN(in.initrd_fd, open_ro(spec.initrd, "initrd"));
  }
  if (!hv.firmware.empty()) {
    ASSIGN_OR_RETURN(in.firmware_fd, open_ro(hv.firmware, "firmware"));
  }
  return Status::Ok();
}

// Binds QMP's socket, opens QEMU's log, console and devices, and starts
// QEMU holding them: in network and mount namespaces of its own when we
// may make them, as a uid of its own when hypervisor.vmm_uid_base is set.
Result<Daemon> SpawnQemu(QemuCommandInput in, const VmPaths& paths, std::string_view why, const config::Config& config,
                         std::optional<uid_t>* vmm_uid) {
  ASSIGN_OR_RETURN(UniqueFd listener, ListenQmp(paths.qmp_socket()));
  UniqueFd log_fd(::open(paths.vmm_log().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640));
  if (!log_fd) return ErrnoStatus("open " + paths.vmm_log());
  const VmSpec& spec = in.spec;
  DaemonOptions d;
  LaunchFds fds(d);
  in.qmp_listen_fd = listener.get();
  d.keep_fds = {listener.get()};
  d.stdout_fd = log_fd.get();
  d.stderr_fd = log_fd.get();
  // QEMU needs no network of its own: NICs come as tap fds, every other
  // device is a unix socket. In an empty netns a compromised VMM cannot
  // reach the host's network, and a tool that configures "the task's pid's
  // netns" (ctr run --cni) cannot change the host's. Its own mount
  // namespace keeps the host's later mounts (pods' rootfs) out of its view.
  const bool can_unshare = HaveEffectiveCapabilities({CAP_SYS_ADMIN});
  d.new_net_namespace = can_unshare;
  d.new_mount_namespace = can_unshare;
  if (!can_unshare)
    kQemuHypervisorLog.Warn("VM {}: no CAP_SYS_ADMIN, so QEMU shares this process's network and mount namespaces",
                            spec.id);
  std::optional<VmmUser> user;
  if (VmmUsersEnabled(config)) {
    if (spec.memory_private && !(spec.memory_fd >= 0 && IsWriteSealed(spec.memory_fd)))
      return FailedPrecondition("a copy-on-write RAM file (memory_private) under an unprivileged VMM that is not a "
                                "write-sealed memfd: QEMU 7.2 opens the file read-write, so the VMM could change "
                                "the shared image");
    ASSIGN_OR_RETURN(user, AcquireVmmUser(config, spec.id));
    d.uid = user->uid;
    d.gid = user->gid;
    d.groups = user->groups;
    fds.Keep(std::move(user->lock));  // QEMU holds its uid's lock while it runs
    *vmm_uid = user->uid;
  } else if (config.hypervisor.vmm_uid_base != 0) {
    kQemuHypervisorLog.Warn("VM {}: no CAP_SETUID/CAP_SETGID, so QEMU runs as this process's user", spec.id);
  }
  UniqueFd console(::open(spec.console_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640));
  if (!console) return ErrnoStatus("open " + spec.console_log);
  in.console_fd = fds.Keep(std::move(console));
  // A copy-on-write clone's RAM is private pages over a shared file: never
  // huge pages. Huge pages would only round QEMU's own small anonymous
  // blocks up to 2 MiB (the ACPI tables' 2 MiB block is one, however little
  // of it is written; so are TCG's code buffer's chunks), per clone.
  d.no_huge_pages = spec.memory_private;
  if (spec.memory_fd >= 0) {
    d.keep_fds.push_back(spec.memory_fd);
  } else if (!spec.memory_file.empty()) {
    ASSIGN_OR_RETURN(UniqueFd ram, OpenMemoryFile(spec, user));
    in.memory_file_fd = fds.Keep(std::move(ram));
  }
  if (!spec.agent_token.empty()) {
    ASSIGN_OR_RETURN(UniqueFd token, AgentTokenFile(spec.agent_token, user));
    in.agent_token_fd = fds.Keep(std::move(token));
  }
  RETURN_IF_ERROR(PassBootDevices(spec, d, fds, in));
  RETURN_IF_ERROR(PassBootFiles(spec, config.hypervisor, fds, in));
  if (can_unshare) {
    JailSpec jail;
    jail.mountpoint = paths.dir;
    ASSIGN_OR_RETURN(d.jail, PlanJail(jail));
  }
  d.argv = BuildQemuCommandLine(in);
  kQemuHypervisorLog.Info("launch VM {} ({}{}{}): {}", spec.id, why,
                          can_unshare ? ", jailed in own netns and mount ns" : "",
                          user ? fmt::format(", uid {}", user->uid) : std::string(), Joined(d.argv));
  return SpawnDaemon(d);  // our copies of the fds close here
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
    return WithVmmLog(Unavailable("QEMU exited during start-up").WithReason(reason::kVmmExited), paths);
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
    kQemuHypervisorLog.Warn("!!! {} !!!", d->reason);
    warned_degraded_ = true;
  }
  return d;
}

Result<VmmPtr> QemuHypervisor::Launch(const VmSpec& spec_in) {
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
    kQemuHypervisorLog.Warn("QEMU {} has no -sandbox support; VM {} runs without seccomp", caps.version, spec.id);

  RETURN_IF_ERROR_CTX(MkdirAll(paths.dir, 0750), what);
  auto lock = VmLock::Acquire(paths.lock(), /*create=*/true);
  if (!lock.ok()) return lock.status().WithContext(what);
  if (PathExists(paths.record()))
    return AlreadyExists(fmt::format("{}: {} already describes a VM (running or not cleaned up)", what, paths.record()));
  LaunchRollback rollback(paths, spec.console_log, *lock);

  std::optional<uid_t> vmm_uid;
  QemuCommandInput input;
  input.hypervisor = &config_.hypervisor;
  input.spec = spec;
  input.accelerator = accel.accelerator;
  input.sandbox = sandbox;
  auto daemon = SpawnQemu(std::move(input), paths, accel.reason, config_, &vmm_uid);
  if (!daemon.ok()) return daemon.status().WithContext(what);
  rollback.Own(std::move(daemon->pidfd));
  RETURN_IF_ERROR_CTX(WriteFileAtomic(paths.pidfile(), std::to_string(daemon->pid) + "\n", 0644, Durability::kVolatile), what);
  VmRecord record;
  record.hypervisor = "qemu";
  record.spec = spec;
  record.accelerator = accel.accelerator;
  record.vmm_binary = config_.hypervisor.path;
  record.vmm_version = caps.version;
  record.qmp_socket = paths.qmp_socket();
  record.vmm_log = paths.vmm_log();
  record.spec.memory_fd = -1;  // meaningful to this launch only
  for (Device& dev : record.spec.devices)
    if (auto* v = std::get_if<VsockDevice>(&dev)) v->vhost_fd = -1;
  record.vmm_uid = vmm_uid ? static_cast<int64_t>(*vmm_uid) : -1;
  auto identity = IdentifyProcess(daemon->pid);
  if (!identity.ok())
    return WithVmmLog(Unavailable(what + ": QEMU exited during start-up").WithReason(reason::kVmmExited), paths);
  record.vmm = *identity;
  RETURN_IF_ERROR_CTX(WriteFileAtomic(paths.record(), VmRecordToJson(record), 0600, Durability::kVolatile), what);

  auto qmp = AwaitQmp(paths, rollback.pidfd(), spec.id, options_.qmp_ready_timeout);
  if (!qmp.ok()) return qmp.status().WithContext(what);
  auto ready = std::chrono::steady_clock::now();
  QemuVmm::Parts parts{std::move(record), std::move(*lock), rollback.Dismiss(), std::move(*qmp), VmState::kPaused, {}};
  auto vm = std::make_unique<QemuVmm>(std::move(parts));
  if (!spec.start_paused) RETURN_IF_ERROR_CTX(vm->Resume(), what);  // vm's destructor cleans up
  kQemuHypervisorLog.Info("VM {} up: QEMU pid {}, QMP ready in {} ms", spec.id, vm->vmm_pid(),
                          std::chrono::duration_cast<milliseconds>(ready - start).count());
  return VmmPtr(std::move(vm));
}

Status ReapUnrecordedQemu(const std::string& state_dir) {
  const VmPaths paths(state_dir);
  const std::string what = "reap an unrecorded QEMU of " + state_dir;
  // Launch makes vm.lock before it spawns QEMU: without one, none was started.
  ASSIGN_OR_RETURN(VmLock lock, VmLock::Acquire(paths.lock(), /*create=*/false, kAttachLockWait));
  if (PathExists(paths.record()))
    return FailedPrecondition(fmt::format("{}: {} exists; attach to that VM instead", what, paths.record()));
  // SpawnQemu hands the console over as an fd whose description is its path
  // (qemu_cmdline.cc), so the state dir is on that QEMU's command line only.
  const std::string marker = "opaque=" + paths.console_log();
  int killed = 0;
  for (const std::string& entry : ListDir("/proc")) {
    const pid_t pid = static_cast<pid_t>(std::strtol(entry.c_str(), nullptr, 10));
    if (pid <= 0 || pid == ::getpid()) continue;
    auto pidfd = OpenProcessWithArgument(pid, marker);
    if (!pidfd.ok()) continue;
    kQemuHypervisorLog.Warn("VM {}: killing QEMU pid {}, started by a launch that never recorded it", paths.dir, pid);
    if (Status st = PidfdSignal(pidfd->get(), SIGKILL); !st.ok()) return st.WithContext(what);
    if (!PidfdWait(pidfd->get(), 10000)) return DeadlineExceeded(fmt::format("{}: pid {} outlived SIGKILL", what, pid));
    ++killed;
  }
  RETURN_IF_ERROR_CTX(RemoveVmmFiles(paths, paths.console_log(), lock), what);
  if (killed == 0) return NotFound(what + ": no such QEMU runs");
  return Status::Ok();
}

Result<VmmPtr> QemuHypervisor::Attach(const std::string& state_dir) {
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

  QemuVmm::Parts parts{std::move(record), std::move(*lock), {}, nullptr, VmState::kPaused, {}};
  auto pidfd = OpenProcess(parts.record.vmm);
  if (!pidfd.ok()) {
    kQemuHypervisorLog.Warn("{}: {}; adopting it as exited", what, pidfd.status().message());
    VmExit e;
    e.reason = "QEMU exited while no driver was attached (" + pidfd.status().message() + ")";
    e.console_tail = ReadLogTail(parts.record.spec.console_log, 4096);
    e.vmm_log_tail = ReadLogTail(paths.vmm_log(), 4096);
    parts.exited = std::move(e);
    return VmmPtr(std::make_unique<QemuVmm>(std::move(parts)));
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
  kQemuHypervisorLog.Info("attached VM {} (QEMU pid {}, {})", parts.record.spec.id, parts.record.vmm.pid,
                          VmStateName(parts.state));
  return VmmPtr(std::make_unique<QemuVmm>(std::move(parts)));
}

}  // namespace capsule::hypervisor
