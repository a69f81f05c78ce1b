// GuestPod: the pod inside this VM, as one object. It holds what CreateSandbox
// set up (identity, the pod's storages) and what the containers share (the
// container engine, the namespace anchor, each container's storages and CRI
// name). Made whole by PodSlot::Create, torn down whole by PodSlot::Destroy:
// containers first, their storages next, the pod's storages last.
//
// Handlers hold a GuestPodPtr for the length of their call, so a
// DestroySandbox racing a call never frees what the call still uses; they
// see a destroyed pod as gone because PodSlot::Current no longer returns it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/engine/container_manager.h"
#include "agent/pod/pod_namespaces.h"
#include "agent/storage/storage.h"
#include "runtime/common/status.h"

namespace capsule::agent::pod {

// RemoveContainer with timeout 0, and the pod's teardown: how long the
// killed processes may take to be reaped.
inline constexpr std::chrono::milliseconds kDefaultRemoveTimeout{10000};

struct PodIdentity {
  std::string id;
  std::string hostname;  // empty: the boot hostname
  bool sandbox_pidns = false;
  std::vector<std::string> mount_points;  // the pod's storages, in mount order
};

class GuestPod {
 public:
  GuestPod(PodIdentity identity, std::vector<storage::MountedStorage> mounts, engine::ContainerManagerPtr engine);
  GuestPod(const GuestPod&) = delete;
  GuestPod& operator=(const GuestPod&) = delete;

  const PodIdentity& identity() const { return identity_; }
  const std::string& id() const { return identity_.id; }
  engine::ContainerManager& engine() const { return *engine_; }
  PodNamespaces& namespaces() { return namespaces_; }

  // Held across a container's creation (and the holder's adoption): which
  // container anchors the namespaces depends on their order, and the
  // teardown must not race a creation.
  [[nodiscard]] std::unique_lock<std::mutex> SerializeCreation() { return std::unique_lock(create_mu_); }

  // SetupSandbox's holder_container_id: that CRI sandbox container becomes
  // the pod holder (agent/engine/pod_holder.h), running, with the pod's
  // hostname in its uts namespace and anchoring the others. Returns its pid.
  Result<pid_t> AdoptHolder(const std::string& container_id);

  // A created container's storages (unmounted when it is forgotten or the
  // pod goes) and CRI name (empty: none).
  void AddContainer(const std::string& id, std::vector<storage::MountedStorage> mounts, const std::string& cri_name);
  // The container was removed from the engine: its name goes, its storages
  // are unmounted (newest first; the first failure is returned).
  Status ForgetContainer(const std::string& id);
  // Container id -> CRI container name, for the containers that have one.
  std::map<std::string, std::string> CriNames() const;

  // Removes every container, unmounts their storages, then the pod's own.
  // Tries every step; returns the first failure. Called once, by PodSlot.
  Status TearDown();

 private:
  Status UnmountContainerStorages(const std::string& id);

  const PodIdentity identity_;
  const engine::ContainerManagerPtr engine_;
  PodNamespaces namespaces_;
  std::mutex create_mu_;
  mutable std::mutex mu_;
  std::vector<storage::MountedStorage> pod_mounts_;  // guarded by mu_; in mount order
  std::map<std::string, std::vector<storage::MountedStorage>> container_mounts_;  // guarded by mu_
  std::map<std::string, std::string> cri_names_;  // guarded by mu_
};

using GuestPodPtr = std::shared_ptr<GuestPod>;

}  // namespace capsule::agent::pod
