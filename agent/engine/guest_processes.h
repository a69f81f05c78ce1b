// GuestProcesses: processes an operator starts in the guest itself, outside
// every container (capsule-runtime exec): the agent's pid, network, ipc and
// uts namespaces and credentials, no seccomp, each in a cgroup of its own
// (capsule-debug-<exec id> under the cgroup root) so that removing it also
// ends whatever it forked. Addressed by exec id, like a container's execs;
// all of them die with the sandbox.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/engine/cgroup_manager.h"
#include "agent/engine/container_manager.h"
#include "agent/engine/exit_monitor.h"
#include "agent/engine/process.h"
#include "agent/engine/stdio.h"
#include "agent/engine/tools_root.h"
#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

// Where a guest process's "/" comes from: the guest's own root (empty), or
// a container's root filesystem (tools_root.h).
struct GuestTools {
  std::string container_id;
  ToolsRootPlan root;  // root.rootfs "": the guest's own root
  // Its init's seccomp profile, when the process runs as that init does.
  std::optional<oci::Seccomp> seccomp;
};

class GuestProcesses {
 public:
  // Processes known at once (running or exited and not yet removed); one
  // more is RESOURCE_EXHAUSTED, after finished ones were swept (and, when
  // the table is full, exited ones nobody waited for: a client that died).
  static constexpr size_t kMaxProcesses = 32;

  // Borrows what its LinuxContainerManager owns (and outlives it).
  GuestProcesses(CgroupManager& cgroups, ExitMonitor& exits, const EngineOptions& options)
      : cgroups_(cgroups), exits_(exits), options_(options) {}
  ~GuestProcesses();
  GuestProcesses(const GuestProcesses&) = delete;
  GuestProcesses& operator=(const GuestProcesses&) = delete;

  // Starts `process`. ALREADY_EXISTS for a known exec id; FAILED_PRECONDITION
  // once RemoveAll began (and ABORTED for a launch it overtook, which is
  // ended again).
  Result<pid_t> Exec(const std::string& exec_id, const oci::Process& process, const GuestTools& tools);
  // The process only, or with `all` everything in its cgroup. NOT_FOUND once
  // it (or, with `all`, everything) has exited.
  Status Signal(const std::string& exec_id, int signal, bool all);
  Result<ExitInfo> Wait(const std::string& exec_id, const CancelCheck& cancel);
  // Forgets an exited process: kills what it left running in its cgroup,
  // removes the cgroup and releases its stdio. FAILED_PRECONDITION while it
  // runs, NOT_FOUND for an unknown id.
  Status RemoveProcess(const std::string& exec_id);
  Result<ProcessIoPtr> Io(const std::string& exec_id);
  // Kills (SIGKILL, all of its cgroup) every process that borrowed the tools
  // of `container_id` and waits up to `timeout` for them, so the container's
  // filesystem is not held by a debug process's mount namespace when the
  // container goes. Their clients see them exit; removing stays theirs.
  Status EndToolUsers(const std::string& container_id, std::chrono::milliseconds timeout);
  // Kills every process and everything they forked (all of them first, then
  // waits up to `timeout` in all), removes their cgroups, and refuses later
  // launches. The sandbox's teardown.
  Status RemoveAll(std::chrono::milliseconds timeout);

 private:
  struct Entry {
    ProcessPtr process;
    std::shared_ptr<Cgroup> cgroup;  // shared: lookups copy the entry
    std::string tools_container;
  };

  Result<Entry> Find(const std::string& exec_id) const;
  // SIGKILL to the cgroup and the process (harmless once they are gone).
  static void Kill(const Entry& entry);
  // Kills, waits for the main process, then always releases its stdio and
  // tries to remove the cgroup (which waits for the rest).
  Status Teardown(const std::string& exec_id, Entry& entry, std::chrono::steady_clock::time_point deadline);
  // Removes entries whose process is finished (exited, waited, drained),
  // and with `exited_too` every exited one.
  void Sweep(bool exited_too);

  CgroupManager& cgroups_;
  ExitMonitor& exits_;
  const EngineOptions& options_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;  // guarded by mu_; an entry without process is being launched
  bool closing_ = false;                  // guarded by mu_
};

}  // namespace capsule::engine
