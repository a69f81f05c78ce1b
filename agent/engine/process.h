// Process: one process the engine started in a container (the init, or an
// exec), with its stdio and, once the reaper reported it, its exit. Exit
// statuses arrive from the process-wide Reaper via ExitMonitor.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/engine/cancel.h"
#include "agent/engine/stdio.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::engine {

struct ExitInfo {
  int status = 0;       // exit code, or 128 + signal
  int wait_status = 0;  // raw, as waitpid reports it
  std::chrono::system_clock::time_point exited_at;
  bool oom_killed = false;
};

class Process {
 public:
  // `on_exit` runs on the reaper thread when the exit is recorded (before
  // waiters wake); it may set oom_killed.
  using ExitHook = std::function<void(ExitInfo&)>;

  Process(std::string exec_id, ProcessIoPtr io) : exec_id_(std::move(exec_id)), io_(std::move(io)) {}

  const std::string& exec_id() const { return exec_id_; }
  const ProcessIoPtr& io() const { return io_; }
  pid_t pid() const;
  // `pidfd` (may be invalid) makes Signal immune to pid reuse.
  void set_pid(pid_t pid, UniqueFd pidfd);
  void set_exit_hook(ExitHook hook);

  // Records the exit (first call wins) and wakes waiters.
  void OnExit(int wait_status);
  bool exited() const;
  // Blocks until the process exited; marks it waited.
  ExitInfo Wait();
  // Same, but nullopt (not marked waited) once `cancel` reports cancelled.
  std::optional<ExitInfo> Wait(const CancelCheck& cancel);
  // nullopt if still running at `deadline`.
  std::optional<ExitInfo> WaitUntil(std::chrono::steady_clock::time_point deadline);
  // Exited, waited for, and all output delivered: its fds can go.
  bool Finished() const;

  // Signals the process; NOT_FOUND once it has exited (containerd's rule).
  Status Signal(int signal) const;

 private:
  const std::string exec_id_;
  const ProcessIoPtr io_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  pid_t pid_ = -1;                 // guarded by mu_
  UniqueFd pidfd_;                 // guarded by mu_
  std::optional<ExitInfo> exit_;  // guarded by mu_
  bool waited_ = false;            // guarded by mu_
  ExitHook exit_hook_;             // guarded by mu_
};

using ProcessPtr = std::shared_ptr<Process>;

}  // namespace capsule::engine
