// Container lifecycle on Linux: create (plan, cgroup, launch to ready),
// start, exec, signals, waits, pause/resume via the freezer, destroy.
#include "agent/engine/linux_container.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "agent/engine/cgroup2.h"
#include "runtime/common/elapsed.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"

namespace capsule::engine {
namespace {

const log::Logger kLinuxContainerLog("engine.container");

// Namespaces an exec (or a container sharing them) joins; network is the VM's.
constexpr oci::NamespaceType kOwnedNamespaces[] = {oci::NamespaceType::kMount, oci::NamespaceType::kPid,
                                                   oci::NamespaceType::kIpc, oci::NamespaceType::kUts,
                                                   oci::NamespaceType::kCgroup, oci::NamespaceType::kTime};

void LogIgnoredFeatures(const std::string& id, const oci::Spec& spec) {
  const oci::Hooks& h = spec.hooks;
  if (!h.prestart.empty() || !h.create_runtime.empty() || !h.poststart.empty() || !h.poststop.empty())
    kLinuxContainerLog.Warn(
        "container {}: prestart/createRuntime/poststart/poststop hooks skipped: they set up the host side "
        "and belong to the runtime that owns the VM (the shim), not the guest",
        id);
  if (!h.create_container.empty() || !h.start_container.empty())
    kLinuxContainerLog.Warn(
        "container {}: createContainer/startContainer hooks skipped: their binaries live on the host and "
        "are not shipped into the guest",
        id);
  if (!spec.process.apparmor_profile.empty() || !spec.process.selinux_label.empty() || !spec.linux.mount_label.empty())
    kLinuxContainerLog.Debug("container {}: AppArmor/SELinux labels ignored: the guest has no LSM policy", id);
}

Result<std::string> AbsoluteRootfs(const std::string& root, const std::string& bundle_dir) {
  if (!root.empty() && root[0] == '/') return root;
  if (bundle_dir.empty()) return InvalidArgument("root.path: \"" + root + "\" is relative and no bundle dir is known");
  return bundle_dir + "/" + root;
}

std::vector<oci::NamespaceType> ExistingNamespaceTypes(pid_t pid) {
  std::vector<oci::NamespaceType> out;
  for (oci::NamespaceType t : kOwnedNamespaces) {
    if (PathExists("/proc/" + std::to_string(pid) + "/ns/" + ProcNsName(t))) out.push_back(t);
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<LinuxContainer>> LinuxContainer::Create(const std::string& id, const oci::Spec& spec,
                                                               const CreateOptions& options, NamespaceFds shared,
                                                               ContainerDeps deps) {
  const auto t0 = std::chrono::steady_clock::now();
  LogIgnoredFeatures(id, spec);
  // The pod holder has no root filesystem of its own: it confines itself.
  std::string rootfs;
  if (!options.pod_holder) {
    ASSIGN_OR_RETURN(rootfs, AbsoluteRootfs(spec.root.path, options.bundle_dir));
  }
  ASSIGN_OR_RETURN(NamespacePlan ns, PlanContainerNamespaces(spec.linux.namespaces, std::move(shared)));
  std::optional<RootfsPlan> rootfs_plan;
  if (!options.pod_holder) {
    ASSIGN_OR_RETURN(rootfs_plan, PlanRootfs(spec, rootfs, ns, /*cgroup2=*/true));
  }
  ASSIGN_OR_RETURN(ProcessPlan plan, PlanProcess(spec.process, spec.linux.seccomp));
  const auto t_plan = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::string cg_path, ResolveCgroupPath(spec.linux.cgroups_path, deps.options.cgroup_parent, id));
  ASSIGN_OR_RETURN(CgroupPtr cgroup, deps.cgroups.Create(cg_path));
  Confinement confinement{spec.process.user,       spec.process.capabilities, spec.process.no_new_privileges,
                          spec.linux.seccomp,       spec.linux.masked_paths,   spec.linux.readonly_paths};
  std::shared_ptr<LinuxContainer> c(
      new LinuxContainer(id, rootfs, options.pod_holder, deps, std::move(cgroup), spec.linux.seccomp,
                         std::move(confinement)));
  const auto t_cgroup = std::chrono::steady_clock::now();
  Status st = c->LaunchInit(std::move(ns), rootfs_plan ? &*rootfs_plan : nullptr, plan, spec.linux.resources);
  if (!st.ok()) {
    Status cleanup = c->Destroy(deps.options.setup_timeout);
    if (!cleanup.ok())
      kLinuxContainerLog.Error("container {}: cleanup after failed create: {}", id, cleanup.ToString());
    return st;
  }
  c->create_ms_.plan_ms = MsBetween(t0, t_plan);
  c->create_ms_.cgroup_ms = MsBetween(t_plan, t_cgroup);
  // Debug: the agent answers these to the host, which logs them; under TCG
  // a console line costs the create about a ms.
  kLinuxContainerLog.Debug(
      "container {} created, init pid {}, cgroup {}, in {:.1f} ms: plan {:.1f} ms, cgroup {:.1f} ms, fork to pid "
      "{:.1f} ms, set-up to ready {:.1f} ms",
      id, c->init_pid(), c->cgroup_->path(), MsSince(t0), c->create_ms_.plan_ms, c->create_ms_.cgroup_ms,
      c->create_ms_.fork_ms, c->create_ms_.setup_ms);
  return c;
}

Status LinuxContainer::LaunchInit(NamespacePlan ns, const RootfsPlan* rootfs, const ProcessPlan& plan,
                                  const std::optional<oci::LinuxResources>& resources) {
  if (resources) RETURN_IF_ERROR_CTX(cgroup_->Apply(*resources), "linux.resources");
  oom_kills_at_create_ = cgroup_->OomKillCount();
  shares_pid_namespace_ = !ns.Creates(oci::NamespaceType::kPid);
  ChildStdio child;
  ASSIGN_OR_RETURN(ProcessIoPtr io, plan.terminal ? ProcessIo::CreateTerminal() : ProcessIo::CreatePipes(&child));
  auto init = std::make_shared<Process>("", io);
  std::weak_ptr<LinuxContainer> weak = weak_from_this();
  init->set_exit_hook([weak](ExitInfo& info) {
    if (auto self = weak.lock()) self->OnInitExit(info);
  });
  {
    std::lock_guard lock(mu_);
    init_ = init;
  }
  LaunchRequest req;
  req.namespaces = std::move(ns);
  ASSIGN_OR_RETURN(req.cgroup_procs, cgroup_->OpenProcs());
  req.rootfs = rootfs;
  req.process = &plan;
  req.stdio = std::move(child);
  req.timeout = deps_.options.setup_timeout;
  ASSIGN_OR_RETURN(LaunchedProcess launched, Launch(req, deps_.exits, init));
  const pid_t pid = init->pid();
  ASSIGN_OR_RETURN(NamespaceFds fds, OpenNamespaces(pid, ExistingNamespaceTypes(pid)));
  const std::string root = "/proc/" + std::to_string(pid) + "/root";
  UniqueFd root_dir(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_dir) return ErrnoStatus("open " + root);
  create_ms_.fork_ms = launched.pid_ms();
  create_ms_.setup_ms = launched.ready_ms();
  {
    std::lock_guard lock(mu_);
    launched_ = std::move(launched);
    ns_fds_ = std::move(fds);
    root_dir_ = std::move(root_dir);
  }
  // The holder's OOM kill, if ever, shows in its exit status; its id
  // changes at adoption, which a watch keyed by id would not follow.
  const std::string events = holder_ ? std::string() : cgroup_->MemoryEventsPath();
  if (!events.empty()) {
    RETURN_IF_ERROR(deps_.oom.Watch(id_, events));
    watching_oom_ = true;
  }
  return Status::Ok();
}

void LinuxContainer::OnInitExit(ExitInfo& info) {
  // A container is over when its init is (runc's kill --all on exit): in a
  // pod's shared pid namespace nothing else ends what the init started, and
  // a child left behind would keep running, and keep the container's stdout
  // open. Done before the exit is reported, so no one sees it half-stopped.
  if (shares_pid_namespace_) {
    if (Status st = cgroup_->SignalAll(SIGKILL); !st.ok())
      kLinuxContainerLog.Warn("container {}: kill what its init left running: {}", id_, st.ToString());
  }
  // An OOM kill is a SIGKILL while the cgroup's oom_kill counter went up.
  if (WIFSIGNALED(info.wait_status) && WTERMSIG(info.wait_status) == SIGKILL &&
      cgroup_->OomKillCount() > oom_kills_at_create_)
    info.oom_killed = true;
  std::lock_guard lock(mu_);
  kLinuxContainerLog.Info("container {}: init exited with {}{}", id_, info.status,
                          info.oom_killed ? " (OOM killed)" : "");
  state_ = ContainerState::kStopped;
}

ContainerState LinuxContainer::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

pid_t LinuxContainer::init_pid() const {
  std::lock_guard lock(mu_);
  return init_ ? init_->pid() : -1;
}

Result<pid_t> LinuxContainer::Start(bool hold_go) {
  std::lock_guard life(lifecycle_mu_);
  std::optional<LaunchedProcess> launched;
  {
    std::lock_guard lock(mu_);
    if (state_ != ContainerState::kCreated) {
      return FailedPrecondition("container " + id_ + ": cannot go from " + std::string(StateName(state_)) +
                                " to running by start")
          .WithReason(reason::kWrongState);
    }
    launched.swap(launched_);
  }
  if (!launched) return FailedPrecondition("container " + id_ + ": already started");
  if (hold_go) {
    std::lock_guard lock(mu_);
    held_go_ = std::move(launched);
    if (state_ == ContainerState::kCreated) state_ = ContainerState::kRunning;
    return init_->pid();
  }
  Status st = launched->Release();
  if (!st.ok()) {
    (void)init_->Signal(SIGKILL);
    return st.WithContext("start container " + id_);
  }
  std::lock_guard lock(mu_);
  if (state_ == ContainerState::kCreated) state_ = ContainerState::kRunning;
  return init_->pid();
}

void LinuxContainer::ReleaseHeldGo() {
  std::optional<LaunchedProcess> held;
  {
    std::lock_guard lock(mu_);
    held.swap(held_go_);
  }
  // An init killed meanwhile (a kill or delete that came first) reports its
  // exit as any other does.
  if (held) {
    if (Status st = held->Release(); !st.ok())
      kLinuxContainerLog.Debug("container {}: the held go was not sent: {}", id_, st.ToString());
  }
}

Result<ProcessPtr> LinuxContainer::Find(const std::string& exec_id) const {
  std::lock_guard lock(mu_);
  if (exec_id.empty()) {
    if (!init_) return NotFound("container " + id_ + " has no init process");
    return init_;
  }
  auto it = execs_.find(exec_id);
  if (it == execs_.end()) return NotFound("container " + id_ + ": no process with exec id " + exec_id);
  return it->second;
}

Result<LaunchRequest> LinuxContainer::ExecRequest() {
  std::lock_guard lock(mu_);
  if (state_ != ContainerState::kRunning)
    return FailedPrecondition("container " + id_ + ": cannot exec in state " + std::string(StateName(state_)) +
                              ", want running");
  LaunchRequest req;
  ASSIGN_OR_RETURN(req.namespaces, PlanJoinAll(ns_fds_));
  ASSIGN_OR_RETURN(req.cgroup_procs, cgroup_->OpenProcs());
  req.root_dir.reset(::fcntl(root_dir_.get(), F_DUPFD_CLOEXEC, 3));
  if (!req.root_dir) return ErrnoStatus("dup container root fd");
  req.timeout = deps_.options.setup_timeout;
  return req;
}

Result<std::string> LinuxContainer::RootfsPath() const {
  if (holder_) return FailedPrecondition("container " + id_ + " is the pod's holder: it has no root filesystem");
  return rootfs_;
}

void LinuxContainer::Rename(const std::string& id) {
  std::lock_guard lock(mu_);
  // Debug: the pod logs the adoption; under TCG every console line costs
  // the claim about a ms.
  kLinuxContainerLog.Debug("container {} (pid {}) is now container {}", id_, init_ ? init_->pid() : -1, id);
  id_ = id;
}

Result<pid_t> LinuxContainer::Exec(const std::string& exec_id, const oci::Process& process) {
  if (exec_id.empty()) return InvalidArgument("exec id must not be empty");
  // Its root is the guest's until it confines itself: nothing to exec in.
  if (holder_) return FailedPrecondition("container " + id_ + " is the pod's holder: it has no filesystem to exec in");
  ASSIGN_OR_RETURN(ProcessPlan plan, PlanProcess(process, seccomp_));
  ASSIGN_OR_RETURN(LaunchRequest req, ExecRequest());
  ChildStdio child;
  ASSIGN_OR_RETURN(ProcessIoPtr io, plan.terminal ? ProcessIo::CreateTerminal() : ProcessIo::CreatePipes(&child));
  auto p = std::make_shared<Process>(exec_id, io);
  {
    std::lock_guard lock(mu_);
    SweepExecs();
    if (execs_.count(exec_id)) return AlreadyExists("container " + id_ + ": exec id " + exec_id + " already exists");
    execs_[exec_id] = p;  // reserves the id while launching
  }
  req.process = &plan;
  req.stdio = std::move(child);
  auto launched = Launch(req, deps_.exits, p);
  Status st = launched.ok() ? launched->Start(deps_.options.setup_timeout) : launched.status();
  if (!st.ok()) {
    if (p->pid() > 0) {
      (void)p->Signal(SIGKILL);
      (void)p->WaitUntil(std::chrono::steady_clock::now() + deps_.options.setup_timeout);
    }
    p->OnExit(W_EXITCODE(255, 0));  // wakes any waiter; no-op if it already exited
    io->Release();
    std::lock_guard lock(mu_);
    execs_.erase(exec_id);
    return st.WithContext("exec " + exec_id + " in container " + id_);
  }
  kLinuxContainerLog.Debug("container {}: exec {} started, pid {}", id_, exec_id, p->pid());
  return p->pid();
}

Status LinuxContainer::Signal(const std::string& exec_id, int signal, bool all) {
  if (!all) {
    ASSIGN_OR_RETURN(ProcessPtr p, Find(exec_id));
    return p->Signal(signal);
  }
  ASSIGN_OR_RETURN(std::vector<pid_t> pids, cgroup_->Pids());
  if (pids.empty()) return NotFound("container " + id_ + " has no running process");
  return cgroup_->SignalAll(signal);
}

Result<ExitInfo> LinuxContainer::Wait(const std::string& exec_id, const CancelCheck& cancel) {
  ASSIGN_OR_RETURN(ProcessPtr p, Find(exec_id));
  std::optional<ExitInfo> info = p->Wait(cancel);
  if (!info) return Cancelled("wait for " + (exec_id.empty() ? "init" : "exec " + exec_id) + " of container " + id_ +
                              ": the caller gave up");
  std::lock_guard lock(mu_);
  SweepExecs();
  return *info;
}

Status LinuxContainer::RemoveProcess(const std::string& exec_id) {
  if (exec_id.empty())
    return InvalidArgument("exec_id: the init process of container " + id_ + " goes with RemoveContainer");
  ASSIGN_OR_RETURN(ProcessPtr p, Find(exec_id));
  if (!p->exited())
    return FailedPrecondition("container " + id_ + ": exec " + exec_id + " is still running; signal it first");
  p->io()->Release();  // wakes a reader still blocked on it
  std::lock_guard lock(mu_);
  ForgetExec(exec_id);
  kLinuxContainerLog.Debug("container {}: exec {} removed", id_, exec_id);
  return Status::Ok();
}

void LinuxContainer::ForgetExec(const std::string& exec_id) {
  execs_.erase(exec_id);
  if (released_set_.erase(exec_id) != 0)
    released_execs_.erase(std::find(released_execs_.begin(), released_execs_.end(), exec_id));
}

Result<ProcessIoPtr> LinuxContainer::Io(const std::string& exec_id) {
  ASSIGN_OR_RETURN(ProcessPtr p, Find(exec_id));
  return p->io();
}

void LinuxContainer::SweepExecs() {
  for (const auto& [id, p] : execs_) {
    if (released_set_.count(id) || !p->Finished()) continue;
    p->io()->Release();
    released_set_.insert(id);
    released_execs_.push_back(id);
  }
  while (released_execs_.size() > kMaxExecTombstones) ForgetExec(std::string(released_execs_.front()));
}

Result<std::vector<ProcessInfo>> LinuxContainer::ListProcesses() {
  ASSIGN_OR_RETURN(std::vector<pid_t> pids, cgroup_->Pids());
  std::map<pid_t, std::string> exec_ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, p] : execs_) exec_ids[p->pid()] = id;
  }
  std::vector<ProcessInfo> out;
  for (pid_t pid : pids) {
    ProcessInfo info{pid, exec_ids.count(pid) ? exec_ids[pid] : "", ""};
    auto comm = ReadFile("/proc/" + std::to_string(pid) + "/comm");
    if (comm.ok()) info.command = comm->substr(0, comm->find('\n'));
    out.push_back(std::move(info));
  }
  return out;
}

Status LinuxContainer::Update(const oci::LinuxResources& resources) {
  if (state() == ContainerState::kStopped) return FailedPrecondition("container " + id_ + " is stopped");
  return cgroup_->Apply(resources).WithContext("update container " + id_);
}

Result<CgroupMetrics> LinuxContainer::Stats() { return cgroup_->Stats(); }

Status LinuxContainer::Pause() {
  std::lock_guard life(lifecycle_mu_);
  RETURN_IF_ERROR(CheckTransition(id_, state(), ContainerState::kPaused));
  RETURN_IF_ERROR_CTX(cgroup_->Freeze(true, deps_.options.freeze_timeout), "pause container " + id_);
  std::lock_guard lock(mu_);
  if (state_ == ContainerState::kRunning) state_ = ContainerState::kPaused;
  return Status::Ok();
}

Status LinuxContainer::Resume() {
  std::lock_guard life(lifecycle_mu_);
  if (state() != ContainerState::kPaused)
    return FailedPrecondition("container " + id_ + ": cannot go from " + std::string(StateName(state())) +
                              " to running by resume")
        .WithReason(reason::kWrongState);
  RETURN_IF_ERROR_CTX(cgroup_->Freeze(false, deps_.options.freeze_timeout), "resume container " + id_);
  std::lock_guard lock(mu_);
  if (state_ == ContainerState::kPaused) state_ = ContainerState::kRunning;
  return Status::Ok();
}

Result<std::string> LinuxContainer::NamespacePath(oci::NamespaceType type) const {
  std::lock_guard lock(mu_);
  if (!init_ || init_->pid() <= 0 || init_->exited())
    return FailedPrecondition("container " + id_ + ": init is not running");
  return "/proc/" + std::to_string(init_->pid()) + "/ns/" + ProcNsName(type);
}

Result<NamespaceFds> LinuxContainer::ShareNamespaces(const std::vector<oci::NamespaceType>& types) const {
  std::lock_guard lock(mu_);
  return DupNamespaces(ns_fds_, types);
}

Status LinuxContainer::WaitAllExited(std::chrono::steady_clock::time_point deadline) {
  std::vector<ProcessPtr> procs;
  {
    std::lock_guard lock(mu_);
    if (init_) procs.push_back(init_);
    for (const auto& [id, p] : execs_) procs.push_back(p);
  }
  for (const auto& p : procs) {
    if (p->pid() <= 0) continue;
    if (!p->WaitUntil(deadline))
      return DeadlineExceeded("container " + id_ + ": process " + std::to_string(p->pid()) + " did not exit");
  }
  return Status::Ok();
}

Status LinuxContainer::Destroy(std::chrono::milliseconds timeout) {
  std::lock_guard life(lifecycle_mu_);
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + timeout;
  {
    std::lock_guard lock(mu_);
    launched_.reset();  // a created-but-not-started init exits on its own
  }
  Status kill = cgroup_->SignalAll(SIGKILL);
  if (!kill.ok()) kLinuxContainerLog.Warn("container {}: kill all: {}", id_, kill.ToString());
  if (auto init = Find(""); init.ok()) (void)(*init)->Signal(SIGKILL);
  // Frozen tasks die on SIGKILL too, but leave the cgroup thawed for rmdir.
  (void)cgroup_->Freeze(false, deps_.options.freeze_timeout);
  const auto t_killed = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(WaitAllExited(deadline));
  const auto t_exited = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    if (init_) init_->io()->Release();
    for (const auto& [id, p] : execs_) p->io()->Release();
    ns_fds_.clear();  // the mount namespace, and every mount in it, goes with the last reference
    root_dir_.reset();
    state_ = ContainerState::kStopped;
  }
  if (watching_oom_) {
    deps_.oom.Unwatch(id_);
    watching_oom_ = false;
  }
  const auto t_released = std::chrono::steady_clock::now();
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - t_released);
  RETURN_IF_ERROR(cgroup_->Destroy(std::max(left, std::chrono::milliseconds(100))));
  kLinuxContainerLog.Info(
      "container {} destroyed in {:.1f} ms: kill {:.1f} ms, exits {:.1f} ms, stdio and namespaces {:.1f} ms, "
      "cgroup {:.1f} ms",
      id_, MsSince(t0), MsBetween(t0, t_killed), MsBetween(t_killed, t_exited), MsBetween(t_exited, t_released),
      MsSince(t_released));
  return Status::Ok();
}

}  // namespace capsule::engine
