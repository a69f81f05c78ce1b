// LinuxContainer: Container on Linux primitives. Owns the container's
// cgroup, its init and exec processes, the fds that keep its namespaces and
// root directory reachable (for execs and for containers joining it), and
// the launch handle between create and start.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "agent/engine/cgroup_manager.h"
#include "agent/engine/container.h"
#include "agent/engine/container_manager.h"
#include "agent/engine/exit_monitor.h"
#include "agent/engine/process_launch.h"
#include "agent/engine/oom_watcher.h"

namespace capsule::engine {

// What a container borrows from its LinuxContainerManager (which outlives it).
struct ContainerDeps {
  CgroupManager& cgroups;
  ExitMonitor& exits;
  OomWatcher& oom;
  const EngineOptions& options;
};

class LinuxContainer : public Container, public std::enable_shared_from_this<LinuxContainer> {
 public:
  // Plans, creates the cgroup and launches the init up to "ready". On
  // failure everything created is torn down again.
  static Result<std::shared_ptr<LinuxContainer>> Create(const std::string& id, const oci::Spec& spec,
                                                        const CreateOptions& options, NamespaceFds shared,
                                                        ContainerDeps deps);

  const std::string& id() const override { return id_; }
  ContainerState state() const override;
  pid_t init_pid() const override;
  CreateTimings create_timings() const override { return create_ms_; }
  using Container::Start;
  Result<pid_t> Start(bool hold_go) override;
  void ReleaseHeldGo() override;
  Result<pid_t> Exec(const std::string& exec_id, const oci::Process& process) override;
  Status Signal(const std::string& exec_id, int signal, bool all) override;
  using Container::Wait;
  Result<ExitInfo> Wait(const std::string& exec_id, const CancelCheck& cancel) override;
  Status RemoveProcess(const std::string& exec_id) override;
  Result<ProcessIoPtr> Io(const std::string& exec_id) override;
  Result<std::vector<ProcessInfo>> ListProcesses() override;
  Status Update(const oci::LinuxResources& resources) override;
  Result<CgroupMetrics> Stats() override;
  Status Pause() override;
  Status Resume() override;
  Result<std::string> RootfsPath() const override;
  Result<Confinement> InitConfinement() const override { return confinement_; }
  Result<std::string> NamespacePath(oci::NamespaceType type) const override;
  Result<NamespaceFds> ShareNamespaces(const std::vector<oci::NamespaceType>& types) const override;

  // The pod holder (pod_holder.h) takes the id of the sandbox container that
  // adopts it; called before the container is published under that id.
  void Rename(const std::string& id);

  // Kills every process, waits for them, releases stdio, namespaces and the
  // cgroup. Idempotent.
  Status Destroy(std::chrono::milliseconds timeout);

 private:
  // Exited execs whose stdio was released, kept so a late Wait still answers.
  static constexpr size_t kMaxExecTombstones = 1024;

  LinuxContainer(std::string id, std::string rootfs, bool holder, ContainerDeps deps, CgroupPtr cgroup,
                 std::optional<oci::Seccomp> seccomp, Confinement confinement)
      : id_(std::move(id)), rootfs_(std::move(rootfs)), holder_(holder), deps_(deps), cgroup_(std::move(cgroup)),
        seccomp_(std::move(seccomp)), confinement_(std::move(confinement)) {}
  // `rootfs` null: the pod holder, which has none.
  Status LaunchInit(NamespacePlan ns, const RootfsPlan* rootfs, const ProcessPlan& plan,
                    const std::optional<oci::LinuxResources>& resources);
  void OnInitExit(ExitInfo& info);
  Result<ProcessPtr> Find(const std::string& exec_id) const;
  Result<LaunchRequest> ExecRequest();
  void SweepExecs();  // needs mu_
  void ForgetExec(const std::string& exec_id);  // needs mu_
  Status WaitAllExited(std::chrono::steady_clock::time_point deadline);

  std::string id_;  // changes once, by Rename, before anyone else can see the container
  const std::string rootfs_;
  const bool holder_;  // the pod holder: no root filesystem, no execs
  const ContainerDeps deps_;
  const CgroupPtr cgroup_;
  const std::optional<oci::Seccomp> seccomp_;  // applies to execs too
  const Confinement confinement_;              // the init's
  uint64_t oom_kills_at_create_ = 0;
  bool watching_oom_ = false;
  // Set before the init can exit: the init is not PID 1 of a pid namespace
  // of its own, so the kernel does not end the rest when it exits.
  bool shares_pid_namespace_ = false;

  std::mutex lifecycle_mu_;  // serialises Start/Pause/Resume/Destroy
  mutable std::mutex mu_;
  ContainerState state_ = ContainerState::kCreated;  // guarded by mu_
  ProcessPtr init_;                                  // guarded by mu_
  std::optional<LaunchedProcess> launched_;          // guarded by mu_; until Start
  std::optional<LaunchedProcess> held_go_;           // guarded by mu_; Start(true) until ReleaseHeldGo
  CreateTimings create_ms_;                          // set by Create, read only after it
  std::map<std::string, ProcessPtr> execs_;          // guarded by mu_
  std::deque<std::string> released_execs_;           // guarded by mu_, oldest first
  std::set<std::string> released_set_;               // guarded by mu_
  NamespaceFds ns_fds_;                              // guarded by mu_
  UniqueFd root_dir_;                                // guarded by mu_
};

}  // namespace capsule::engine
