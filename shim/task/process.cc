// See process.h.
#include "shim/task/process.h"

#include <fmt/format.h>

#include <chrono>

#include "runtime/common/elapsed.h"
#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"
#include "shim/pod/agent_status.h"
#include "shim/task/agent_stdio.h"

namespace capsule::shim::task {
namespace {

const log::Logger kProcessLog("shim.process");
namespace v1 = agentclient::v1;
using agentclient::AgentClient;

// WaitProcess failures that are neither "the VM is gone" nor final are
// retried this often, this far apart, before the exit is reported unknown.
constexpr int kWaitAttempts = 5;
constexpr std::chrono::milliseconds kWaitRetryDelay{200};

}  // namespace

Result<std::unique_ptr<Process>> Process::Create(ProcessParams params) {
  std::unique_ptr<Process> p(new Process(std::move(params)));
  auto copier = io::StdioCopier::Open(p->p_.stdio);
  if (!copier.ok()) return std::move(copier).status().WithContext("stdio of " + p->Name());
  p->copier_ = std::move(*copier);
  return p;
}

Process::~Process() {
  if (watcher_.joinable()) watcher_.join();
}

std::string Process::Name() const {
  return is_init() ? "container " + p_.container_id : "exec " + p_.exec_id + " of " + p_.container_id;
}

bool Process::StdinClosedAtCreate() const {
  std::lock_guard lock(mu_);
  return StdinClosedAtCreateLocked();
}

bool Process::StdinClosedAtCreateLocked() const { return copier_ && !copier_->ForwardsStdin(); }

Status Process::AttachStdio(bool stdin_closed) {
  std::shared_ptr<io::StdioCopier> copier;
  {
    std::lock_guard lock(mu_);
    if (stdio_attached_ || !copier_) return Status::Ok();
    stdio_attached_ = true;
    copier = copier_;
  }
  if (stdin_closed) copier->StdinClosedByAgent();
  // Not under the lock: Start may call the agent (CloseStdin, when the
  // create did not close it), and State, Kill and Wait must not wait for that.
  return copier->Start(std::make_shared<AgentStdio>(p_.agent, p_.container_id, p_.exec_id));
}

Result<uint32_t> Process::StartInAgent(bool stdin_closed, std::optional<double>* agent_ms) {
  if (p_.running_guest_pid != 0) return p_.running_guest_pid;
  if (is_init()) {
    v1::StartContainerRequest req;
    req.set_container_id(p_.container_id);
    auto r = p_.agent->Call<Result<v1::StartContainerResponse>>([&](AgentClient& a) { return a.StartContainer(req); });
    if (!r.ok()) return pod::FromAgent(r.status(), "start " + Name());
    *agent_ms = MsOfMicrosField(r->handled_us());
    return r->pid();
  }
  v1::ExecProcessRequest req;
  req.set_container_id(p_.container_id);
  req.set_exec_id(p_.exec_id);
  req.set_process_json(p_.process_json);
  req.set_stdin_closed(stdin_closed);
  auto r = p_.agent->Call<Result<v1::ExecProcessResponse>>([&](AgentClient& a) { return a.ExecProcess(req); });
  if (!r.ok()) return pod::FromAgent(r.status(), "start " + Name());
  return r->pid();
}

Result<uint32_t> Process::Start() {
  std::unique_lock lock(mu_);
  if (starting_) return FailedPrecondition("start " + Name() + ": a start is already in progress")
      .WithReason(reason::kWrongState);
  RETURN_IF_ERROR(CheckTransition(state_, ProcessState::kRunning, "start " + Name()));
  // The agent's answer may take long (a slow guest, up to the agent's
  // deadline): State, Kill, Wait and Delete answer meanwhile, so the lock
  // is not held across the call. `starting_` keeps a second Start and a
  // Delete out; the process stays created until the answer.
  starting_ = true;
  // Nothing forwards stdin: the agent closed it at the create (init) or
  // closes it at this start (exec).
  const bool stdin_closed = StdinClosedAtCreateLocked();
  lock.unlock();
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<double> agent_ms;
  auto pid = StartInAgent(stdin_closed, &agent_ms);
  const double start_ms = MsSince(t0);
  lock.lock();
  starting_ = false;
  if (!pid.ok()) {
    const uint32_t status = pid.status().code() == Code::kNotFound ? kNotFoundExitStatus : kCannotRunExitStatus;
    kProcessLog.Warn("{} could not start ({}); it is stopped with status {}", Name(), pid.status().message(), status);
    RecordExitLocked(ExitInfo{status, NowUnixNanos(), false});
    cv_.notify_all();
    return std::move(pid).status();
  }
  started_in_agent_ = true;  // an exec then needs RemoveProcess whatever happens next
  guest_pid_ = *pid;
  if (state_ != ProcessState::kCreated) {
    // Stopped meanwhile (its VM died, its container was deleted, the shim
    // is stopping): it stays stopped with the exit already reported.
    cv_.notify_all();
    return FailedPrecondition(fmt::format("start {}: it was {} while the agent started it", Name(),
                                          ProcessStateName(state_)))
        .WithReason(reason::kWrongState);
  }
  state_ = ProcessState::kRunning;
  cv_.notify_all();
  lock.unlock();
  // Attached only now, for the init too: output long-polls (ReadStdout,
  // ReadStderr) sent between a container's create and its start slowed the
  // start in the guest, 12-16 ms alone against 29-37 ms with them (TCG,
  // container_api_vm_bench StartBehindItsOutputLongPolls). The guest's
  // pipes keep what the process writes meanwhile.
  const auto t_attach = std::chrono::steady_clock::now();
  RETURN_IF_ERROR_CTX(AttachStdio(stdin_closed), "stdio of " + Name());
  kProcessLog.Info("{} started (guest pid {}) in {:.1f} ms{}, stdio {:.1f} ms", Name(), *pid, start_ms,
                   agent_ms ? fmt::format(" (the agent's {:.1f})", *agent_ms) : "", MsSince(t_attach));
  return p_.host_pid;
}

void Process::WatchExit() {
  std::lock_guard lock(mu_);
  // A created init is watched too once it was signalled (killed before
  // start); while its start is in flight, Start's caller watches it.
  if (state_ == ProcessState::kStopped || state_ == ProcessState::kDeleted || watcher_.joinable() || starting_)
    return;
  // The exit is reported once its output is out, as long as that takes no
  // longer than kExitOutputGrace: a process that keeps the output open
  // cannot hold the exit, and with it a stop's answer, back. Delete waits
  // for the rest (bounded by the drain's own limits), as runc's shim waits
  // for its copy group before deleting: removing the container in the
  // guest ends its output streams.
  watcher_ = std::thread([this] {
    const ExitInfo exit = AwaitExit();
    const auto exited = std::chrono::steady_clock::now();
    if (p_.before_exit) p_.before_exit();
    if (!WaitOutput(kExitOutputGrace).ok())
      kProcessLog.Info("{}: output still open {} ms after its exit; reporting the exit", Name(),
                       kExitOutputGrace.count());
    {
      std::lock_guard exiting(mu_);
      draining_ = true;
      RecordExitLocked(exit);
    }
    DrainOutput(exited + kExitDrainTimeout);
    std::lock_guard drained(mu_);
    draining_ = false;
    cv_.notify_all();
  });
}

ExitInfo Process::AwaitExit() {
  v1::WaitProcessRequest req;
  req.set_container_id(p_.container_id);
  req.set_exec_id(p_.exec_id);
  for (int attempt = 1;; ++attempt) {
    auto r = p_.agent->LongPoll<Result<v1::WaitProcessResponse>>([&](AgentClient& a) { return a.WaitProcess(req); });
    if (r.ok()) {
      ExitInfo e{static_cast<uint32_t>(r->status()), r->exited_at_unix_nanos(), r->oom_killed()};
      if (e.exited_at_ns == 0) e.exited_at_ns = NowUnixNanos();
      return e;
    }
    if ((p_.vm_gone && p_.vm_gone()) || p_.agent->revoked()) {
      kProcessLog.Warn("{}: its VM is gone; reporting it killed", Name());
      return ExitInfo{kKilledExitStatus, NowUnixNanos(), false};
    }
    if (r.status().code() == Code::kNotFound || attempt >= kWaitAttempts) {
      kProcessLog.Error("wait for {}: {}; reporting exit status {}", Name(), r.status().ToString(), kUnknownExitStatus);
      return ExitInfo{kUnknownExitStatus, NowUnixNanos(), false};
    }
    kProcessLog.Warn("wait for {} (attempt {}): {}; retrying", Name(), attempt, r.status().ToString());
    std::this_thread::sleep_for(kWaitRetryDelay);
  }
}

Status Process::WaitOutput(std::chrono::milliseconds timeout) {
  std::shared_ptr<io::StdioCopier> copier;
  {
    std::lock_guard lock(mu_);
    if (!stdio_attached_ || !copier_) return Status::Ok();
    copier = copier_;
  }
  return copier->WaitOutput(std::max(timeout, std::chrono::milliseconds(0)));
}

void Process::DrainOutput(std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard lock(mu_);
    if (!stdio_attached_ || !copier_) return;
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (Status st = WaitOutput(left); !st.ok())
    kProcessLog.Warn("{}: output still open {} ms after its exit; closing it now", Name(), kExitDrainTimeout.count());
  std::lock_guard lock(mu_);
  copier_.reset();  // closes the host ends (CRI's ExecSync reads them to EOF)
}

void Process::RecordExit(const ExitInfo& exit) {
  std::lock_guard lock(mu_);
  RecordExitLocked(exit);
}

void Process::RecordExitLocked(const ExitInfo& exit) {
  if (state_ != ProcessState::kRunning && state_ != ProcessState::kCreated) return;
  const bool was_running = state_ == ProcessState::kRunning;
  state_ = ProcessState::kStopped;
  exit_ = exit;
  kProcessLog.Info("{} exited with status {}", Name(), exit.status);
  // Queues /tasks/exit before anyone can Delete. An exec that never ran
  // had no start event, so it gets no exit event either.
  if (p_.on_exit && !drop_events_ && (was_running || is_init())) p_.on_exit(*this, exit);
  cv_.notify_all();
}

void Process::Abandon(uint32_t status) { RecordExit(ExitInfo{status, NowUnixNanos(), false}); }

void Process::DropEvents() {
  std::lock_guard lock(mu_);
  drop_events_ = true;
}

Status Process::Kill(uint32_t signal, bool all) {
  {
    std::lock_guard lock(mu_);
    if (state_ == ProcessState::kStopped || state_ == ProcessState::kDeleted)
      return NotFound(fmt::format("{} has already exited", Name()));
    if (state_ == ProcessState::kCreated && !is_init())
      return NotFound(fmt::format("{} has not been started", Name()));
  }
  v1::SignalProcessRequest req;
  req.set_container_id(p_.container_id);
  req.set_exec_id(p_.exec_id);
  req.set_signal(signal);
  req.set_all(all);
  Status st = pod::FromAgent(p_.agent->Call<Status>([&](AgentClient& a) { return a.SignalProcess(req); }),
                             fmt::format("signal {} to {}", signal, Name()));
  if (st.ok() && is_init()) WatchExit();  // no-op once watched; catches a kill before start
  return st;
}

ExitInfo Process::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return exit_.has_value(); });
  return *exit_;
}

Result<ExitInfo> Process::Delete() {
  std::unique_lock lock(mu_);
  if (starting_)
    return FailedPrecondition("delete " + Name() + ": its start is in progress (kill it, then wait)")
        .WithReason(reason::kWrongState);
  if (draining_ && !cv_.wait_for(lock, kExitDrainTimeout + io::kCopierStopTimeout, [&] { return !draining_; }))
    kProcessLog.Warn("delete {}: its output is still being copied; deleting anyway", Name());
  RETURN_IF_ERROR(CheckTransition(state_, ProcessState::kDeleted, "delete " + Name()));
  const bool started = started_in_agent_;
  ExitInfo exit = exit_.value_or(ExitInfo{0, NowUnixNanos(), false});
  state_ = ProcessState::kDeleted;
  if (!exit_) {
    exit_ = exit;  // a Wait on a never-started process returns now
    cv_.notify_all();
  }
  lock.unlock();
  // The copier stays until the Process goes: an init's copy threads end
  // only once its container is removed from the guest.
  if (started && !is_init()) {
    // The agent keeps an exec's status until told; the init goes with its container.
    v1::RemoveProcessRequest req;
    req.set_container_id(p_.container_id);
    req.set_exec_id(p_.exec_id);
    Status st = p_.agent->Call<Status>([&](AgentClient& a) { return a.RemoveProcess(req); });
    if (!st.ok() && st.code() != Code::kNotFound) kProcessLog.Warn("forget {} in the agent: {}", Name(), st.ToString());
  }
  return exit;
}

Status Process::ResizePty(uint32_t width, uint32_t height) {
  v1::TtyWinResizeRequest req;
  req.set_container_id(p_.container_id);
  req.set_exec_id(p_.exec_id);
  req.set_row(height);
  req.set_column(width);
  return pod::FromAgent(p_.agent->Call<Status>([&](AgentClient& a) { return a.TtyWinResize(req); }),
                        "resize the terminal of " + Name());
}

void Process::CloseStdin() {
  std::shared_ptr<io::StdioCopier> copier;
  {
    std::lock_guard lock(mu_);
    copier = copier_;
  }
  if (copier) copier->CloseStdin();
}

ProcessSnapshot Process::Snapshot() const {
  std::lock_guard lock(mu_);
  return ProcessSnapshot{state_, p_.host_pid, guest_pid_, exit_};
}

}  // namespace capsule::shim::task
