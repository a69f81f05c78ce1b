// ContainerManager: the containers of one sandbox (the pod in this VM), by
// id, and the sandbox-wide OOM event queue. The agent's container RPCs look
// a container up here and call it. Implemented by LinuxContainerManager.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/engine/container.h"
#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

class GuestProcesses;

struct EngineOptions {
  // The cgroup2 mount; containers go to <root>/<linux.cgroupsPath>, or
  // <root>/<cgroup_parent>/<id> when the spec has none.
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string cgroup_parent = "capsule";
  // Bound on one container process's setup, from fork to ready.
  std::chrono::milliseconds setup_timeout{60000};
  std::chrono::milliseconds freeze_timeout{5000};
  // The agent binary, run with --pod-holder as the pod holder
  // (pod_holder.h); empty: this engine makes no holders.
  std::string pod_holder_exe;
};

struct CreateOptions {
  // Base for a relative root.path.
  std::string bundle_dir;
  // Join these namespaces of another container instead of the spec's entries
  // (a pod's containers share the sandbox's ipc and uts, and its pid with
  // CRI's pod pid mode).
  std::string share_namespaces_from;
  std::vector<oci::NamespaceType> share_types;
  // The pod holder (pod_holder.h): no root filesystem, no execs.
  bool pod_holder = false;
};

class ContainerManager {
 public:
  virtual ~ContainerManager() = default;

  // Sets the container up (CREATED); ALREADY_EXISTS for a known id.
  virtual Result<ContainerPtr> Create(const std::string& id, const oci::Spec& spec, const CreateOptions& options) = 0;
  // NOT_FOUND for an unknown id.
  virtual Result<ContainerPtr> Get(const std::string& id) const = 0;
  virtual std::vector<ContainerPtr> List() const = 0;
  // Kills every process, waits up to `timeout` for them, releases stdio,
  // mounts (the mount namespace) and the cgroup. NOT_FOUND for an unknown id.
  virtual Status Remove(const std::string& id, std::chrono::milliseconds timeout) = 0;
  virtual Status RemoveAll(std::chrono::milliseconds timeout) = 0;
  // Id of the next container with an OOM kill; nullopt after `timeout`.
  virtual std::optional<std::string> WaitOomEvent(std::chrono::milliseconds timeout) = 0;
  // Processes in the guest outside every container (guest_processes.h);
  // nullptr when this engine cannot start them.
  virtual GuestProcesses* Guest() { return nullptr; }
  // Makes the pod holder (pod_holder.h) ahead of any sandbox container, and
  // starts it. A no-op while one is ready.
  virtual Status PreparePodHolder() { return Unimplemented("this engine makes no pod holder"); }
  // The sandbox container `id` becomes the ready holder (made now when none
  // is), running. ALREADY_EXISTS for a known id.
  virtual Result<ContainerPtr> AdoptPodHolder(const std::string&) {
    return Unimplemented("this engine makes no pod holder");
  }
  // A container's whole life once, leaving nothing (rehearsal.h); its ms.
  virtual Result<double> Rehearse() { return Unimplemented("this engine cannot rehearse"); }
};

using ContainerManagerPtr = std::unique_ptr<ContainerManager>;

}  // namespace capsule::engine
