// Exit bookkeeping of one process.
#include "agent/engine/process.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace capsule::engine {

pid_t Process::pid() const {
  std::lock_guard lock(mu_);
  return pid_;
}

void Process::set_pid(pid_t pid, UniqueFd pidfd) {
  std::lock_guard lock(mu_);
  pid_ = pid;
  pidfd_ = std::move(pidfd);
}

void Process::set_exit_hook(ExitHook hook) {
  std::lock_guard lock(mu_);
  exit_hook_ = std::move(hook);
}

void Process::OnExit(int wait_status) {
  ExitInfo info;
  info.wait_status = wait_status;
  info.status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status)
                : WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status)
                                           : 255;
  info.exited_at = std::chrono::system_clock::now();
  ExitHook hook;
  {
    std::lock_guard lock(mu_);
    if (exit_) return;
    hook = exit_hook_;
  }
  if (hook) hook(info);
  {
    std::lock_guard lock(mu_);
    if (exit_) return;
    exit_ = info;
    pidfd_.reset();  // only Signal needs it, and Signal now answers NOT_FOUND
  }
  cv_.notify_all();
}

bool Process::exited() const {
  std::lock_guard lock(mu_);
  return exit_.has_value();
}

ExitInfo Process::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return exit_.has_value(); });
  waited_ = true;
  return *exit_;
}

std::optional<ExitInfo> Process::Wait(const CancelCheck& cancel) {
  if (!cancel.polls()) return Wait();
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, kCancelPollInterval, [&] { return exit_.has_value(); })) {
    if (cancel.cancelled()) return std::nullopt;
  }
  waited_ = true;
  return *exit_;
}

std::optional<ExitInfo> Process::WaitUntil(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return exit_.has_value(); })) return std::nullopt;
  return *exit_;
}

bool Process::Finished() const {
  std::lock_guard lock(mu_);
  return exit_ && waited_ && io_->drained();
}

Status Process::Signal(int signal) const {
  std::lock_guard lock(mu_);
  if (exit_ || pid_ <= 0) return NotFound("process " + (exec_id_.empty() ? "init" : exec_id_) + " has exited");
  // Through the pidfd, a signal cannot hit a new process that reused the
  // pid between the reaper's waitpid and OnExit.
  int rc = pidfd_ ? static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd_.get(), signal, nullptr, 0))
                  : ::kill(pid_, signal);
  if (rc != 0) {
    if (errno == ESRCH) return NotFound("process " + std::to_string(pid_) + " has exited");
    return ErrnoStatus("kill(" + std::to_string(pid_) + ", " + std::to_string(signal) + ")");
  }
  return Status::Ok();
}

}  // namespace capsule::engine
