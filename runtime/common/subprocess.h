// ChildProcess: a spawned program owned by this process. Destroying a running
// child kills (SIGKILL) and reaps it, so no failure path leaves an orphan.
// A pidfd tracks the child so waits can poll it alongside other fds.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule {

struct SpawnOptions {
  std::vector<std::string> argv;              // argv[0] is the program path
  std::optional<std::vector<std::string>> env;  // nullopt: inherit ours
  // -1: /dev/null. Otherwise the fd becomes the child's 0/1/2.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Descriptors the child inherits at the same numbers (CLOEXEC cleared).
  std::vector<int> keep_fds;
  // Descriptors the child inherits at given numbers, like Go's ExtraFiles:
  // {child_fd, parent_fd}; child_fd >= 3, parent_fd > 2. For protocols that
  // fix the numbers (containerd's logging binaries read fds 3, 4, 5).
  std::vector<std::pair<int, int>> extra_fds;
  std::string cwd;
  bool new_session = false;      // setsid(): survive our terminal and group
  bool die_with_parent = false;  // PR_SET_PDEATHSIG(SIGKILL)
  // Drop to this uid and gid, with no supplementary groups, no capabilities
  // and no_new_privs, just before exec (drop_user.h). -1: stay who we are.
  int64_t uid = -1;
  int64_t gid = -1;
};

class ChildProcess {
 public:
  static Result<ChildProcess> Spawn(const SpawnOptions& options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Readable once the child has exited (poll for POLLIN).
  int pidfd() const { return pidfd_.get(); }
  bool reaped() const { return reaped_; }

  Status Signal(int sig);
  // Waits for exit; DEADLINE_EXCEEDED if `timeout` passes first. Returns the
  // raw wait status (use ExitCode()).
  Result<int> Wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Reaps the child if it has exited; true when it has.
  bool TryReap();
  // SIGTERM, then SIGKILL after `grace`; always reaps.
  int Terminate(std::chrono::milliseconds grace);
  // Gives up ownership: the child is neither killed nor reaped by us.
  pid_t Release();

 private:
  ChildProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  void KillAndReap();

  pid_t pid_ = -1;
  UniqueFd pidfd_;
  bool reaped_ = false;
  int wait_status_ = 0;
};

// Exit code as a shell reports it: the code, or 128+signal.
int ExitCode(int wait_status);

// Opens a pidfd for any process (not only children): readable when it exits.
Result<UniqueFd> OpenPidfd(pid_t pid);

}  // namespace capsule
