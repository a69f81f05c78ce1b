// Reaper subscription and pid -> Process routing.
#include "agent/engine/exit_monitor.h"

#include <signal.h>

#include "runtime/common/logging.h"

namespace capsule::engine {
namespace {
const log::Logger kLog("engine.exit");
}  // namespace

Result<std::unique_ptr<ExitMonitor>> ExitMonitor::Create(Reaper& reaper) {
  if (!reaper.active())
    return FailedPrecondition("the process reaper is not running: start capsule::Reaper before the engine");
  std::unique_ptr<ExitMonitor> m(new ExitMonitor(reaper));
  ExitMonitor* self = m.get();
  m->token_ = reaper.Subscribe([self](pid_t pid, int status) { self->OnReaped(pid, status); });
  return m;
}

ExitMonitor::~ExitMonitor() { reaper_.Unsubscribe(token_); }

void ExitMonitor::Register(pid_t pid, const ProcessPtr& process) {
  std::optional<int> early;
  {
    std::lock_guard lock(mu_);
    processes_[pid] = process;
    early = reaper_.TakeStatus(pid);
  }
  if (!early) return;
  // Alive (even as our unreaped child): the status was a stale one.
  if (::kill(pid, 0) == 0) {
    kLog.Debug("pid {}: dropped a stale exit status of an earlier process", pid);
    return;
  }
  {
    std::lock_guard lock(mu_);
    processes_.erase(pid);
  }
  process->OnExit(*early);
}

std::optional<int> ExitMonitor::TakeHelperStatus(pid_t pid, std::chrono::milliseconds timeout) {
  return reaper_.WaitStatus(pid, std::chrono::steady_clock::now() + timeout);
}

void ExitMonitor::OnReaped(pid_t pid, int wait_status) {
  ProcessPtr p;
  {
    std::lock_guard lock(mu_);
    auto it = processes_.find(pid);
    if (it == processes_.end()) return;
    p = it->second.lock();
    processes_.erase(it);
    // Ours: drop the reaper's copy so it cannot be mistaken later.
    (void)reaper_.TakeStatus(pid);
  }
  if (p) p->OnExit(wait_status);
}

}  // namespace capsule::engine
