// ExitMonitor: routes the process-wide Reaper's (pid, status) reports to
// the engine's Process objects. Tolerates exits reported before the pid was
// registered (the status waits in the Reaper and is taken at Register) and
// exits of pids it does not know (left to whoever owns them).
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>

#include "agent/engine/process.h"
#include "runtime/common/reaper.h"
#include "runtime/common/status.h"

namespace capsule::engine {

class ExitMonitor {
 public:
  // FAILED_PRECONDITION unless the reaper was started (PID 1's job).
  static Result<std::unique_ptr<ExitMonitor>> Create(Reaper& reaper);
  ~ExitMonitor();
  ExitMonitor(const ExitMonitor&) = delete;
  ExitMonitor& operator=(const ExitMonitor&) = delete;

  // Call while the process cannot have exited on its own yet (it is blocked
  // on Launch's sync socket): a status the reaper already holds for
  // this pid is then a stale one of an earlier process with the same pid,
  // unless the process is really gone (killed meanwhile).
  void Register(pid_t pid, const ProcessPtr& process);
  // Takes the status of a helper pid (Launch's intermediate child).
  std::optional<int> TakeHelperStatus(pid_t pid, std::chrono::milliseconds timeout);

 private:
  // Shared with the reaper's callback: Reaper::Unsubscribe does not wait for
  // a callback already in flight on the reaper thread, so the callback keeps
  // this alive rather than pointing into a destroyed ExitMonitor.
  struct State {
    explicit State(Reaper& r) : reaper(r) {}
    void OnReaped(pid_t pid, int wait_status);
    Reaper& reaper;
    std::mutex mu;
    std::map<pid_t, std::weak_ptr<Process>> processes;  // guarded by mu
  };

  explicit ExitMonitor(Reaper& reaper) : state_(std::make_shared<State>(reaper)) {}

  std::shared_ptr<State> state_;
  int token_ = 0;
};

}  // namespace capsule::engine
