// Guest processes go through the same Launch as container execs (fork,
// cgroup join, clone, sync socket), with no namespace joined and, for a
// tools root, only a new mount namespace; a tenant's tools run with its
// container init's seccomp profile (tools_root.h).
#include "agent/engine/guest_processes.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include <vector>

#include "agent/engine/process_launch.h"
#include "agent/engine/process_setup.h"
#include "runtime/common/logging.h"

namespace capsule::engine {
namespace {

const log::Logger kGuestProcessesLog("engine.guest");

std::string CgroupName(const std::string& exec_id) { return "capsule-debug-" + exec_id; }

}  // namespace

GuestProcesses::~GuestProcesses() {
  Status st = RemoveAll(options_.setup_timeout);
  if (!st.ok()) kGuestProcessesLog.Error("guest processes teardown: {}", st.ToString());
}

Result<pid_t> GuestProcesses::Exec(const std::string& exec_id, const oci::Process& process,
                                   const GuestTools& tools) {
  if (exec_id.empty()) return InvalidArgument("exec id must not be empty");
  ASSIGN_OR_RETURN(ProcessPlan plan, PlanProcess(process, tools.seccomp));
  Sweep(/*exited_too=*/false);
  bool full = false;
  {
    std::lock_guard lock(mu_);
    full = entries_.size() >= kMaxProcesses;
  }
  if (full) Sweep(/*exited_too=*/true);
  {
    std::lock_guard lock(mu_);
    if (closing_) return FailedPrecondition("the sandbox is being destroyed");
    if (entries_.count(exec_id)) return AlreadyExists("guest process " + exec_id + " already exists");
    if (entries_.size() >= kMaxProcesses)
      return ResourceExhausted("the guest already runs " + std::to_string(kMaxProcesses) +
                               " debug processes; remove finished ones first");
    entries_[exec_id] = Entry{};  // reserves the id while launching
  }
  auto launched = [&]() -> Result<Entry> {
    ASSIGN_OR_RETURN(CgroupPtr cgroup, cgroups_.Create(CgroupName(exec_id)));
    ChildStdio child;
    auto io = plan.terminal ? ProcessIo::CreateTerminal() : ProcessIo::CreatePipes(&child);
    if (!io.ok()) {
      (void)cgroup->Destroy(options_.setup_timeout);
      return io.status();
    }
    Entry e{std::make_shared<Process>(exec_id, *io), std::move(cgroup), tools.container_id};
    LaunchRequest req;
    auto procs = e.cgroup->OpenProcs();
    Status st = procs.status();
    if (st.ok()) {
      req.cgroup_procs = std::move(*procs);
      if (!tools.root.rootfs.empty()) {
        req.namespaces.unshare_flags = CLONE_NEWNS;
        req.tools_root = tools.root;
      }
      req.process = &plan;
      req.stdio = std::move(child);
      req.timeout = options_.setup_timeout;
      auto l = Launch(req, exits_, e.process);
      st = l.ok() ? l->Start(options_.setup_timeout) : l.status();
    }
    if (!st.ok()) {
      // Killed and reaped before its exit is recorded by hand: a recorded
      // exit would make the kill a no-op.
      Status down = Teardown(exec_id, e, std::chrono::steady_clock::now() + options_.setup_timeout);
      if (!down.ok())
        kGuestProcessesLog.Error("guest process {}: cleanup after failed start: {}", exec_id, down.ToString());
      e.process->OnExit(W_EXITCODE(255, 0));  // wakes any waiter; no-op if it already exited
      return st;
    }
    return e;
  }();
  std::unique_lock lock(mu_);
  if (!launched.ok()) {
    entries_.erase(exec_id);
    return std::move(launched).status().WithContext("guest process " + exec_id);
  }
  if (closing_) {
    entries_.erase(exec_id);
    lock.unlock();
    Status down = Teardown(exec_id, *launched, std::chrono::steady_clock::now() + options_.setup_timeout);
    if (!down.ok()) kGuestProcessesLog.Error("guest process {}: {}", exec_id, down.ToString());
    return Status(Code::kAborted, "guest process " + exec_id + ": the sandbox was destroyed while it started");
  }
  const pid_t pid = launched->process->pid();
  entries_[exec_id] = std::move(*launched);
  kGuestProcessesLog.Info("guest process {} started, pid {}, {}", exec_id, pid,
                          tools.root.rootfs.empty() ? std::string("in the guest's root")
                          : tools.root.confined
                              ? "tools from container " + tools.container_id + ", as its init runs"
                              : "tools from container " + tools.container_id + ", as the guest's root");
  return pid;
}

Result<GuestProcesses::Entry> GuestProcesses::Find(const std::string& exec_id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(exec_id);
  if (it == entries_.end() || !it->second.process) return NotFound("no guest process with exec id " + exec_id);
  return it->second;
}

Status GuestProcesses::Signal(const std::string& exec_id, int signal, bool all) {
  ASSIGN_OR_RETURN(Entry e, Find(exec_id));
  if (!all) return e.process->Signal(signal);
  ASSIGN_OR_RETURN(std::vector<pid_t> pids, e.cgroup->Pids());
  if (pids.empty()) return NotFound("guest process " + exec_id + " has nothing running");
  return e.cgroup->SignalAll(signal);
}

Result<ExitInfo> GuestProcesses::Wait(const std::string& exec_id, const CancelCheck& cancel) {
  ASSIGN_OR_RETURN(Entry e, Find(exec_id));
  std::optional<ExitInfo> info = e.process->Wait(cancel);
  if (!info) return Cancelled("wait for guest process " + exec_id + ": the caller gave up");
  return *info;
}

Status GuestProcesses::RemoveProcess(const std::string& exec_id) {
  Entry e;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(exec_id);
    if (it == entries_.end() || !it->second.process) return NotFound("no guest process with exec id " + exec_id);
    if (!it->second.process->exited())
      return FailedPrecondition("guest process " + exec_id + " is still running; signal it first");
    e = std::move(it->second);
    entries_.erase(it);
  }
  RETURN_IF_ERROR(Teardown(exec_id, e, std::chrono::steady_clock::now() + options_.setup_timeout));
  kGuestProcessesLog.Info("guest process {} removed", exec_id);
  return Status::Ok();
}

Result<ProcessIoPtr> GuestProcesses::Io(const std::string& exec_id) {
  ASSIGN_OR_RETURN(Entry e, Find(exec_id));
  return e.process->io();
}

Status GuestProcesses::EndToolUsers(const std::string& container_id, std::chrono::milliseconds timeout) {
  std::vector<std::pair<std::string, Entry>> users;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, e] : entries_)
      if (e.process && e.tools_container == container_id) users.emplace_back(id, e);
  }
  for (const auto& [id, e] : users) Kill(e);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& [id, e] : users) {
    if (e.process->pid() > 0 && !e.process->WaitUntil(deadline))
      return DeadlineExceeded("guest process " + id + " borrowing the tools of container " + container_id +
                              " did not exit after SIGKILL");
    kGuestProcessesLog.Info("guest process {} ended: container {}, whose tools it used, is being removed", id,
                            container_id);
  }
  return Status::Ok();
}

void GuestProcesses::Kill(const Entry& e) {
  Status kill = e.cgroup->SignalAll(SIGKILL);
  if (!kill.ok()) kGuestProcessesLog.Warn("guest process {}: kill all: {}", e.process->exec_id(), kill.ToString());
  if (e.process->pid() > 0) (void)e.process->Signal(SIGKILL);
}

Status GuestProcesses::Teardown(const std::string& exec_id, Entry& e, std::chrono::steady_clock::time_point deadline) {
  Kill(e);
  Status waited;
  if (e.process->pid() > 0 && !e.process->WaitUntil(deadline))
    waited = DeadlineExceeded("guest process " + exec_id + " (pid " + std::to_string(e.process->pid()) +
                              ") did not exit after SIGKILL");
  e.process->io()->Release();
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  Status removed = e.cgroup->Destroy(std::max(left, std::chrono::milliseconds(100)))
                       .WithContext("remove the cgroup of guest process " + exec_id);
  return waited.ok() ? removed : waited;
}

void GuestProcesses::Sweep(bool exited_too) {
  std::vector<std::pair<std::string, Entry>> finished;
  {
    std::lock_guard lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      const ProcessPtr& p = it->second.process;
      if (p && (p->Finished() || (exited_too && p->exited()))) {
        finished.emplace_back(it->first, std::move(it->second));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [id, e] : finished) {
    Status st = Teardown(id, e, std::chrono::steady_clock::now() + options_.setup_timeout);
    if (!st.ok()) kGuestProcessesLog.Warn("guest process {}: {}", id, st.ToString());
    if (exited_too) kGuestProcessesLog.Info("guest process {} swept: it exited and its client never removed it", id);
  }
}

Status GuestProcesses::RemoveAll(std::chrono::milliseconds timeout) {
  std::map<std::string, Entry> all;
  {
    std::lock_guard lock(mu_);
    closing_ = true;  // a launch in flight ends itself when it sees this
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.process) {
        all.insert(entries_.extract(it++));
      } else {
        ++it;
      }
    }
  }
  // Every kill goes out before any wait, so one process stuck in the kernel
  // does not use up the others' time.
  for (const auto& [id, e] : all) Kill(e);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Status first;
  for (auto& [id, e] : all) {
    Status st = Teardown(id, e, deadline);
    if (!st.ok() && first.ok()) first = st;
  }
  if (!all.empty()) kGuestProcessesLog.Info("{} guest process(es) stopped with the sandbox", all.size());
  return first;
}

}  // namespace capsule::engine
