// cgroup v2 implementation of CgroupManager over a cgroup2 mount (the guest's
// /sys/fs/cgroup; configurable so host tests can point at another mount).
// Controllers are enabled top-down in each ancestor's cgroup.subtree_control.
#pragma once

#include <string>
#include <vector>

#include "agent/engine/cgroup_manager.h"

namespace capsule::engine {

class Cgroup2Manager : public CgroupManager {
 public:
  // `root` is a cgroup2 mount point. INVALID_ARGUMENT if it is not one.
  static Result<CgroupManagerPtr> Open(const std::string& root);

  Result<CgroupPtr> Create(const std::string& relative_path) override;
  std::vector<std::string> AvailableControllers() const override;

 private:
  explicit Cgroup2Manager(std::string root) : root_(std::move(root)) {}
  // Enables the wanted controllers that `dir` offers in its subtree_control.
  void EnableControllers(const std::string& dir) const;

  std::string root_;
};

// Controllers Capsule enables for containers, in cgroup-v2.rst's names.
inline constexpr const char* kWantedControllers[] = {"cpu", "cpuset", "memory", "pids", "io", "hugetlb"};

// Normalizes an OCI cgroupsPath to a path relative to the cgroup root:
// strips leading '/', maps systemd's "slice:prefix:name" to
// "slice/prefix-name.scope", rejects "..". Empty -> "<parent>/<id>".
Result<std::string> ResolveCgroupPath(const std::string& cgroups_path, const std::string& parent,
                                      const std::string& container_id);

}  // namespace capsule::engine
