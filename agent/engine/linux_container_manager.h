// LinuxContainerManager: the ContainerManager of one pod VM. Owns the containers by id,
// the cgroup manager, the exit monitor (subscribed to the process-wide
// Reaper, which must be started first) and the OOM watcher.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "agent/engine/cgroup_manager.h"
#include "agent/engine/container_manager.h"
#include "agent/engine/exit_monitor.h"
#include "agent/engine/guest_processes.h"
#include "agent/engine/linux_container.h"
#include "agent/engine/oom_watcher.h"
#include "runtime/common/reaper.h"

namespace capsule::engine {

class LinuxContainerManager : public ContainerManager {
 public:
  // `cgroups` defaults to Cgroup2Manager over options.cgroup_root.
  static Result<std::unique_ptr<LinuxContainerManager>> Create(EngineOptions options, Reaper& reaper,
                                                 CgroupManagerPtr cgroups = nullptr);
  ~LinuxContainerManager() override;

  Result<ContainerPtr> Create(const std::string& id, const oci::Spec& spec, const CreateOptions& options) override;
  Result<ContainerPtr> Get(const std::string& id) const override;
  std::vector<ContainerPtr> List() const override;
  Status Remove(const std::string& id, std::chrono::milliseconds timeout) override;
  Status RemoveAll(std::chrono::milliseconds timeout) override;
  std::optional<std::string> WaitOomEvent(std::chrono::milliseconds timeout) override;
  GuestProcesses* Guest() override { return guest_.get(); }
  Status PreparePodHolder() override;
  Result<ContainerPtr> AdoptPodHolder(const std::string& id) override;
  Result<double> Rehearse() override;

 private:
  LinuxContainerManager(EngineOptions options, CgroupManagerPtr cgroups, std::unique_ptr<ExitMonitor> exits,
          std::unique_ptr<OomWatcher> oom)
      : options_(std::move(options)),
        cgroups_(std::move(cgroups)),
        exits_(std::move(exits)),
        oom_(std::move(oom)),
        guest_(std::make_unique<GuestProcesses>(*cgroups_, *exits_, options_)) {}
  Result<NamespaceFds> SharedNamespaces(const CreateOptions& options) const;
  Status PrepareHolderLocked();  // needs holder_mu_
  Status AwaitHolderReady(LinuxContainer& holder);

  const EngineOptions options_;
  const CgroupManagerPtr cgroups_;
  const std::unique_ptr<ExitMonitor> exits_;
  const std::unique_ptr<OomWatcher> oom_;
  const std::unique_ptr<GuestProcesses> guest_;  // after what it borrows, so it goes first
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<LinuxContainer>> containers_;  // guarded by mu_
  std::set<std::string> creating_;                                     // guarded by mu_
  std::mutex holder_mu_;                    // serialises making and adopting the holder
  std::shared_ptr<LinuxContainer> holder_;  // guarded by holder_mu_; ready, not yet adopted
};

}  // namespace capsule::engine
