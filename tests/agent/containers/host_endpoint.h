// HostEndpoint: capsule-agent as a normal root process on this host
// (--no-init: private mount and UTS namespaces, unix socket), a busybox
// rootfs in a temp dir, and containers' cgroups under a parent of their own
// on the host's cgroup2 hierarchy (memory/pids/cpu are on cgroup v1 here,
// so tests needing them skip and run in the VM suite instead).
#pragma once

#include <memory>
#include <optional>

#include "runtime/common/file_util.h"
#include "tests/agent/containers/agent_endpoint.h"
#include "tests/agent/server/agent_fixture.h"

namespace capsule::agent::testing {

class HostEndpoint final : public AgentEndpoint {
 public:
  // `extra_args` go to capsule-agent (e.g. --max-blocking-calls).
  static Result<std::unique_ptr<HostEndpoint>> Start(const std::vector<std::string>& extra_args = {});
  ~HostEndpoint() override;

  std::string name() const override { return "host"; }
  v1::Agent::Stub& stub() override { return agent_->stub(); }
  std::string rootfs() const override { return rootfs_->path(); }
  std::vector<v1::Storage> sandbox_storages() const override { return {}; }
  std::string scratch_dir() const override { return scratch_->path(); }
  std::string cgroup_parent_dir() const override { return cgroup_root_ + "/" + cgroup_parent_; }
  bool has_resource_controllers() const override { return resource_controllers_; }
  bool sets_clock() const override { return false; }
  bool WatchesMount(const std::string& mount_point) const override;

  AgentUnderTest& agent() { return *agent_; }

 private:
  HostEndpoint() = default;

  std::optional<TempDir> rootfs_;
  std::optional<TempDir> scratch_;
  std::string cgroup_root_;
  std::string cgroup_parent_;
  bool resource_controllers_ = false;
  std::unique_ptr<AgentUnderTest> agent_;
};

// EndpointFactory for INSTANTIATE_TEST_SUITE_P.
Result<AgentEndpointPtr> StartHostEndpoint();

}  // namespace capsule::agent::testing
