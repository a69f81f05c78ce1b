// Container: one OCI container in the guest and its processes (the init and
// execs, addressed by exec id; "" is the init). Each agent RPC on a container
// is one call here. Implemented by LinuxContainer; tests may fake it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/engine/cgroup_manager.h"
#include "agent/engine/container_state.h"
#include "agent/engine/namespaces.h"
#include "agent/engine/process.h"
#include "agent/engine/stdio.h"
#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

// What a container's init runs with, as its OCI spec gave it: its identity,
// its privileges and the paths of its /proc it may not see or change.
struct Confinement {
  oci::User user;
  std::optional<oci::Capabilities> capabilities;
  bool no_new_privileges = false;
  std::optional<oci::Seccomp> seccomp;
  std::vector<std::string> masked_paths;
  std::vector<std::string> readonly_paths;
};

struct ProcessInfo {
  pid_t pid = 0;
  std::string exec_id;  // "" for the init and for processes the engine did not start
  std::string command;  // /proc/<pid>/comm
};

// What a container's create cost the engine, in ms (zeros where an engine
// does not measure it): its plan (rootfs, namespaces, seccomp), cgroup, the
// init's fork until its pid is known, and its set-up until ready to exec.
struct CreateTimings {
  double plan_ms = 0, cgroup_ms = 0, fork_ms = 0, setup_ms = 0;
};

class Container {
 public:
  virtual ~Container() = default;

  virtual const std::string& id() const = 0;
  virtual ContainerState state() const = 0;
  virtual pid_t init_pid() const = 0;
  virtual CreateTimings create_timings() const { return {}; }

  // CREATED -> RUNNING: the init is told to exec its program, and the
  // answer does not wait for the exec (runc's and Kata's start do not
  // either); an exec that fails then is the init's exit, 127, with the
  // error on its stderr. Returns its pid. With `hold_go` the init is told
  // only by ReleaseHeldGo(): StartContainer calls that once its answer has
  // left, so the exec does not take the guest's vCPU first.
  virtual Result<pid_t> Start(bool hold_go) = 0;
  Result<pid_t> Start() { return Start(false); }
  // Sends the go a Start(true) held back; a no-op without one.
  virtual void ReleaseHeldGo() = 0;
  // Starts `process` in the container's namespaces and cgroup (RUNNING only).
  // ALREADY_EXISTS for a known exec id.
  virtual Result<pid_t> Exec(const std::string& exec_id, const oci::Process& process) = 0;
  // One process, or with `all` every process of the container's cgroup.
  // NOT_FOUND when the target has exited.
  virtual Status Signal(const std::string& exec_id, int signal, bool all) = 0;
  // Blocks until the process exits; CANCELLED once `cancel` reports it.
  virtual Result<ExitInfo> Wait(const std::string& exec_id, const CancelCheck& cancel) = 0;
  Result<ExitInfo> Wait(const std::string& exec_id) { return Wait(exec_id, CancelCheck()); }
  // Forgets an exited exec: its stdio is released and the id may be reused.
  // INVALID_ARGUMENT for the init (""; it goes with the container), NOT_FOUND
  // for an unknown id, FAILED_PRECONDITION while the process runs.
  virtual Status RemoveProcess(const std::string& exec_id) = 0;
  // stdio of a process, for Write/Read/CloseStdin/Resize.
  virtual Result<ProcessIoPtr> Io(const std::string& exec_id) = 0;
  virtual Result<std::vector<ProcessInfo>> ListProcesses() = 0;

  virtual Status Update(const oci::LinuxResources& resources) = 0;
  virtual Result<CgroupMetrics> Stats() = 0;
  virtual Status Pause() = 0;
  virtual Status Resume() = 0;

  // The container's root filesystem as the agent sees it (root.path made
  // absolute): a guest debug process can borrow its tools.
  virtual Result<std::string> RootfsPath() const {
    return Unimplemented("container " + id() + ": its root filesystem is not known");
  }
  // What the container's init runs with: all its own files may be run with
  // (a guest debug process that borrows them, unless its operator asks for
  // the guest's root).
  virtual Result<Confinement> InitConfinement() const {
    return Unimplemented("container " + id() + ": its init's confinement is not known");
  }
  // "/proc/<init pid>/ns/<type>" while the init lives.
  virtual Result<std::string> NamespacePath(oci::NamespaceType type) const = 0;
  // Duplicates of the fds the container holds on its namespaces (they outlive
  // the init), for another container to join (CreateOptions).
  virtual Result<NamespaceFds> ShareNamespaces(const std::vector<oci::NamespaceType>& types) const = 0;
};

using ContainerPtr = std::shared_ptr<Container>;

}  // namespace capsule::engine
