// cgroup v2 for the guest: controllers the container engine needs are
// enabled in the root's subtree_control, so each container's cgroup (a child
// of the root) can limit cpu, memory, pids and io.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::agent::init {

inline constexpr const char* kCgroupRoot = "/sys/fs/cgroup";

struct ControllerReport {
  std::vector<std::string> enabled;
  std::vector<std::string> unavailable;  // not in cgroup.controllers
};

// Enables each of `wanted` that the kernel offers; FAILED if the kernel has
// a controller but refuses to enable it.
Result<ControllerReport> EnableControllers(const std::string& root, const std::vector<std::string>& wanted);

// cpu, cpuset, io, memory, pids.
std::vector<std::string> DefaultControllers();

}  // namespace capsule::agent::init
