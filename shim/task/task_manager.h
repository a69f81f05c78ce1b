// TaskManager: the shim's containers and pods. It decides where a new task
// goes — a CRI sandbox or an annotation-less container gets a new VM, a CRI
// container joins its pod's VM — keeps the id -> Container map, stops a VM
// once its last container is deleted, and turns process exits and OOM
// kills into events. The ttrpc handlers (shim/service) are thin calls into
// this and into Container/Process.
#pragma once

#include <map>
#include <chrono>
#include <memory>
#include <optional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "shim/events/publisher.h"
#include "shim/io/stdio_uri.h"
#include "shim/mount/mounter.h"
#include "shim/task/container.h"
#include "shim/task/sandbox.h"
#include "shim/task/vm_provider.h"

namespace capsule::shim::task {

// CRI's annotations (containerd pkg/cri/annotations).
inline constexpr const char* kContainerTypeAnnotation = "io.kubernetes.cri.container-type";
inline constexpr const char* kSandboxIdAnnotation = "io.kubernetes.cri.sandbox-id";
inline constexpr const char* kContainerTypeSandbox = "sandbox";
inline constexpr const char* kContainerTypeContainer = "container";
inline constexpr const char* kSandboxNameAnnotation = "io.kubernetes.cri.sandbox-name";
inline constexpr const char* kSandboxNamespaceAnnotation = "io.kubernetes.cri.sandbox-namespace";

struct TaskManagerDeps {
  std::string ns;
  config::Config config;
  // Why the config could not be loaded: every Create fails with it.
  Status config_error;
  std::string config_path;  // recorded in bundles for `delete`
  VmProvider* vms = nullptr;
  mount::Mounter* mounter = nullptr;
  events::Publisher* events = nullptr;
};

struct CreateParams {
  std::string id;
  std::string bundle;
  std::vector<mount::MountSpec> rootfs;
  bool terminal = false;
  std::string stdin_path, stdout_path, stderr_path;
};

class TaskManager {
 public:
  explicit TaskManager(TaskManagerDeps deps) : d_(std::move(deps)) {}
  ~TaskManager();  // StopAll()

  // ALREADY_EXISTS for a known id; the rest as Container::Create.
  Result<ContainerPtr> Create(const CreateParams& params);
  // NOT_FOUND naming the id.
  Result<ContainerPtr> Get(const std::string& id) const;
  // An exec, or the container (then its VM too when it was the pod's last).
  Result<ExitInfo> Delete(const std::string& id, const std::string& exec_id);
  bool Empty() const;
  // How long the shim has had no task and no creation in flight (since it
  // started, or since its last task was deleted); nullopt while it has one.
  // had_task: whether any task was ever created here.
  struct Idle {
    std::chrono::steady_clock::duration duration{};
    bool had_task = false;
  };
  std::optional<Idle> IdleFor() const;
  // Stops every VM (so every blocked call returns) and forgets everything.
  void StopAll();

  const TaskManagerDeps& deps() const { return d_; }

 private:
  // Create's work once the id is reserved.
  Result<ContainerPtr> CreateReserved(const CreateParams& params);
  Result<SandboxPtr> NewSandbox(const std::string& sandbox_id, const nlohmann::json& spec,
                                const std::map<std::string, std::string>& annotations, bool cri_sandbox,
                                RecordClaimedVm record);
  // Run under a process's lock: they only queue.
  void PublishExit(const Process& process, const ExitInfo& exit);
  // From the sandbox's OOM watcher (GetOOMEvent).
  void PublishOom(const std::string& container_id);
  // An exit the agent marked OOM-killed carries its own /tasks/oom (queued
  // before /tasks/exit) unless the watcher already reported one: the
  // watcher's long poll can lose the race with the exit, and `ctr run --rm`
  // or CRI then delete the task and stop the VM before it is fetched.
  void PublishOomOfExit(const Process& process, const ExitInfo& exit);
  void ForgetOoms(const std::string& container_id);

  const TaskManagerDeps d_;
  mutable std::mutex mu_;
  std::set<std::string> creating_;                 // guarded by mu_: ids being created
  std::map<std::string, ContainerPtr> containers_;  // guarded by mu_
  std::map<std::string, SandboxPtr> sandboxes_;     // guarded by mu_: by sandbox id
  // guarded by mu_: when the shim last became empty (or started)
  std::chrono::steady_clock::time_point empty_since_ = std::chrono::steady_clock::now();
  bool had_task_ = false;  // guarded by mu_

  // Own lock: PublishExit runs under a process's lock, PublishOom on the
  // watcher's thread; neither takes mu_.
  std::mutex oom_mu_;
  std::set<std::string> oom_reported_;  // guarded by oom_mu_: by the watcher
  std::set<std::string> oom_at_exit_;   // guarded by oom_mu_: by an exit
};

}  // namespace capsule::shim::task
