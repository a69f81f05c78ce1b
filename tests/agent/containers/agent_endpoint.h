// AgentEndpoint: where the container API tests find a capsule-agent to talk
// to. The same test bodies (container_api_tests.cc) run against the agent
// as a host process (host_endpoint.cc) and, with a few lines of fixture,
// against the agent as PID 1 of a pod VM: a VM endpoint only has to boot
// once, expose a connected stub, and put a busybox rootfs where the guest
// sees it (the virtio-fs share).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "capsule/agent/v1/agent.grpc.pb.h"

namespace capsule::agent::testing {

namespace v1 = ::capsule::agent::v1;

class AgentEndpoint {
 public:
  virtual ~AgentEndpoint() = default;

  virtual std::string name() const = 0;
  virtual v1::Agent::Stub& stub() = 0;
  // A busybox root filesystem, as a path the agent can use for root.path.
  virtual std::string rootfs() const = 0;
  // Storages every CreateSandbox needs so that rootfs() is reachable (the
  // VM's share); empty for a host agent.
  virtual std::vector<v1::Storage> sandbox_storages() const = 0;
  // A writable folder (agent's view) for storages the tests mount.
  virtual std::string scratch_dir() const = 0;
  // The agent's cgroup folder for containers without cgroupsPath (its
  // --cgroup-parent under the cgroup2 root), for leak and limit checks.
  virtual std::string cgroup_parent_dir() const = 0;
  // Whether the leak checks look at this mount point of the agent's. A host
  // agent's namespace is rslave of the host's, where other programs mount
  // and unmount at any time: it watches only its own temp dirs, the only
  // places the tests make the agent mount anything.
  virtual bool WatchesMount(const std::string& /*mount_point*/) const { return true; }
  // memory, pids and cpu controllers available to containers (pure cgroup2
  // in a VM; a hybrid v1/v2 host has none of them on its v2 hierarchy).
  virtual bool has_resource_controllers() const = 0;
  // The agent may set the clock (PID 1 of a VM): SetupSandbox works. A
  // --no-init agent on the host refuses to set the host's.
  virtual bool sets_clock() const = 0;
};

using AgentEndpointPtr = std::unique_ptr<AgentEndpoint>;

}  // namespace capsule::agent::testing
