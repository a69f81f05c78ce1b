// Launch: starts a container process in two steps, create then start.
//   agent --fork--> intermediate: joins cgroup, setns/unshare, (exec: chroot)
//   intermediate --clone(CLONE_PARENT)--> container process (the agent's
//   child, so the Reaper sees its exit), which waits for "go" (its pid is
//   registered), sets up rootfs/console/credentials, reports ready, and execs
//   only when Start() or Release() says so. Errors in either child up to
//   then come back as a Status.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "agent/engine/exit_monitor.h"
#include "agent/engine/namespaces.h"
#include "agent/engine/process.h"
#include "agent/engine/process_setup.h"
#include "agent/engine/rootfs.h"
#include "agent/engine/stdio.h"
#include "agent/engine/tools_root.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::engine {

struct LaunchRequest {
  NamespacePlan namespaces;
  UniqueFd cgroup_procs;                // cgroup.procs to join (optional)
  UniqueFd root_dir;                    // exec: the container's "/" to chroot into
  const RootfsPlan* rootfs = nullptr;   // container init only
  std::optional<ToolsRootPlan> tools_root;  // guest debug process: EnterToolsRoot (needs a new mount ns)
  const ProcessPlan* process = nullptr;
  ChildStdio stdio;                     // pipes mode; closed here after fork
  std::chrono::milliseconds timeout{60000};
};

// A created container process, blocked until Start().
class LaunchedProcess {
 public:
  LaunchedProcess(UniqueFd sync, double pid_ms, double ready_ms)
      : sync_(std::move(sync)), pid_ms_(pid_ms), ready_ms_(ready_ms) {}
  // Lets the process exec; OK once execve succeeded (or the process died,
  // which its exit status then tells). An exec's start (the caller waits
  // on it, and its error is the call's).
  Status Start(std::chrono::milliseconds timeout);
  // Lets the process exec and returns at once, not waiting for the exec
  // (runc's and Kata's container start do not either). An exec that
  // fails there (a binary of the wrong format, a seccomp filter refusing
  // execve) is the process's exit, 127, with the error on its stderr. What
  // could be checked before (the executable found and executable, the
  // rootfs, credentials) failed the create already.
  Status Release();
  // Where the launch's time went: fork until the process's pid was known
  // (the intermediate joined the cgroup and namespaces and cloned), then
  // its set-up (rootfs, credentials) until it was ready.
  double pid_ms() const { return pid_ms_; }
  double ready_ms() const { return ready_ms_; }

 private:
  Status Go(bool awaited);

  UniqueFd sync_;  // closing it before Start makes the process exit
  double pid_ms_ = 0, ready_ms_ = 0;
};

// On success the process is registered with `monitor` and `process` knows
// its pid; its console (tty mode) is in process->io(). On failure nothing is
// left running.
Result<LaunchedProcess> Launch(LaunchRequest& request, ExitMonitor& monitor, const ProcessPtr& process);

}  // namespace capsule::engine
