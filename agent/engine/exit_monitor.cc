// Reaper subscription and pid -> Process routing.
#include "agent/engine/exit_monitor.h"

#include <signal.h>

#include "runtime/common/logging.h"

namespace capsule::engine {
namespace {
const log::Logger kExitMonitorLog("engine.exit");
}  // namespace

Result<std::unique_ptr<ExitMonitor>> ExitMonitor::Create(Reaper& reaper) {
  if (!reaper.active())
    return FailedPrecondition("the process reaper is not running: start capsule::Reaper before the engine");
  std::unique_ptr<ExitMonitor> m(new ExitMonitor(reaper));
  m->token_ = reaper.Subscribe([state = m->state_](pid_t pid, int status) { state->OnReaped(pid, status); });
  return m;
}

ExitMonitor::~ExitMonitor() { state_->reaper.Unsubscribe(token_); }

void ExitMonitor::Register(pid_t pid, const ProcessPtr& process) {
  std::optional<int> early;
  {
    std::lock_guard lock(state_->mu);
    state_->processes[pid] = process;
    early = state_->reaper.TakeStatus(pid);
  }
  if (!early) return;
  // Alive (even as our unreaped child): the status was a stale one.
  if (::kill(pid, 0) == 0) {
    kExitMonitorLog.Debug("pid {}: dropped a stale exit status of an earlier process", pid);
    return;
  }
  {
    std::lock_guard lock(state_->mu);
    state_->processes.erase(pid);
  }
  process->OnExit(*early);
}

std::optional<int> ExitMonitor::TakeHelperStatus(pid_t pid, std::chrono::milliseconds timeout) {
  return state_->reaper.WaitStatus(pid, std::chrono::steady_clock::now() + timeout);
}

void ExitMonitor::State::OnReaped(pid_t pid, int wait_status) {
  ProcessPtr p;
  {
    std::lock_guard lock(mu);
    auto it = processes.find(pid);
    if (it == processes.end()) return;
    p = it->second.lock();
    processes.erase(it);
    // Ours: drop the reaper's copy so it cannot be mistaken later.
    (void)reaper.TakeStatus(pid);
  }
  if (p) p->OnExit(wait_status);
}

}  // namespace capsule::engine
