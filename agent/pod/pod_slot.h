// PodSlot: the VM's one place for a pod. Before any pod it holds the
// container engine made ahead (Prepare: in a pooled VM, before its claim, so
// every clone of the template carries it) and rehearses on it, and the
// storages mounted ahead (MountAhead: the VM's shared fs, after a clone's
// restore); Create makes the pod whole (modules, storages, hostname,
// resolv.conf, then the engine) or undoes every step; Destroy tears it down
// whole. One pod at a time.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/engine/container_manager.h"
#include "agent/engine/linux_container_manager.h"
#include "agent/modules/loader.h"
#include "agent/pod/guest_pod.h"
#include "agent/pod/pod_spec.h"
#include "agent/storage/storage.h"
#include "runtime/common/status.h"

namespace capsule::agent::pod {

// Makes the container engine of a new pod (tests pass a fake).
using EngineFactory = std::function<Result<engine::ContainerManagerPtr>()>;
// The real engine over `options` and the process Reaper.
EngineFactory LinuxEngine(engine::EngineOptions options);

// What the pod may touch; tests point it away from the host's files.
struct PodEnvironment {
  std::string resolv_conf_path = "/etc/resolv.conf";
  bool apply_hostname = true;                // sethostname(2) in our UTS namespace
  modules::ModuleLoader* modules = nullptr;  // not owned; null: kernel_modules unsupported
};

class PodSlot {
 public:
  PodSlot(PodEnvironment env, EngineFactory engines) : env_(std::move(env)), engines_(std::move(engines)) {}
  // Tears the pod down (errors are logged) and empties the idle engine.
  ~PodSlot();
  PodSlot(const PodSlot&) = delete;
  PodSlot& operator=(const PodSlot&) = delete;

  // Makes the engine and its pod holder ahead of the pod. Not fatal: what
  // is not ready then is made when the pod needs it.
  Status Prepare();
  // agent.proto Rehearse: on the idle engine, taken out meanwhile (a pod
  // made during the rehearsal gets an engine of its own); `storage_drivers`
  // have their modules loaded. Returns the rehearsal's milliseconds.
  Result<double> Rehearse(const std::vector<std::string>& storage_drivers);
  // agent.proto Rehearse's storages: mounted before any pod and kept for the
  // pod whose spec names the same storage, which takes it over (and unmounts
  // it with the pod). One mounted ahead already is not mounted again.
  // FAILED_PRECONDITION while a pod exists; on failure nothing new stays
  // mounted.
  Status MountAhead(const std::vector<storage::StorageSpec>& specs);

  // ALREADY_EXISTS while a pod exists; INVALID_ARGUMENT naming the field for
  // bad input; on any failure nothing stays mounted.
  Result<GuestPodPtr> Create(const PodSpec& spec);
  // Tears the pod down; without one it is a no-op, so retries are safe.
  Status Destroy();
  // FAILED_PRECONDITION [NO_SANDBOX] without a pod.
  Result<GuestPodPtr> Current() const;

 private:
  // The idle engine, taken out, or a new one.
  Result<engine::ContainerManagerPtr> TakeIdleEngine();
  // Back as the idle engine unless one is there or a pod exists.
  void ReturnIdleEngine(engine::ContainerManagerPtr engine);
  struct MountedAhead {
    storage::StorageSpec spec;
    storage::MountedStorage mounted;
  };
  // The storage mounted ahead as `spec` (lifecycle_mu_ held); end() when none.
  std::vector<MountedAhead>::iterator FindMountedAhead(const storage::StorageSpec& spec);
  // The storage mounted ahead as `spec`, taken out; nullopt when none.
  std::optional<storage::MountedStorage> TakeMountedAhead(const storage::StorageSpec& spec);

  const PodEnvironment env_;
  const EngineFactory engines_;
  std::mutex lifecycle_mu_;  // serializes Create and Destroy
  std::mutex rehearse_mu_;   // one rehearsal at a time: they share an id, a cgroup and a rootfs dir
  mutable std::mutex mu_;
  GuestPodPtr pod_;                    // guarded by mu_; null without a pod
  engine::ContainerManagerPtr idle_;  // guarded by mu_; Prepare's, until a pod takes it
  std::vector<MountedAhead> ahead_;    // guarded by lifecycle_mu_; MountAhead's, until a pod takes them
};

}  // namespace capsule::agent::pod
