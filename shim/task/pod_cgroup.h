// PodCgroup: the VM's host processes (QEMU, virtiofsd, the vsock back end)
// in the pod sandbox's cgroup (linux.cgroupsPath of the sandbox spec, the
// cgroupfs form "/kubepods/.../pod<uid>/<sandbox id>"), so the kubelet sees
// the pod's real memory and CPU and a RuntimeClass overhead is enforced —
// in the cold and the warm path alike (a pooled VM leaves the pool's
// cgroup at claim). cgroup v1 (every mounted controller hierarchy, the
// hybrid unified one too) and v2. Leaf dirs it made are removed once the
// processes are gone (after the VM stopped).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::shim::task {

class PodCgroup {
 public:
  // Moves `pids` (and their child processes) into `cgroups_path` under each
  // hierarchy mounted below `cgroup_root`. INVALID_ARGUMENT for a path that
  // is not an absolute cgroupfs path (systemd's "slice:prefix:name" is not
  // supported yet) or that climbs out with "..".
  static Result<std::unique_ptr<PodCgroup>> Join(const std::string& cgroups_path, const std::vector<pid_t>& pids,
                                                 const std::string& cgroup_root = "/sys/fs/cgroup");
  ~PodCgroup();  // Remove()
  PodCgroup(const PodCgroup&) = delete;
  PodCgroup& operator=(const PodCgroup&) = delete;

  // rmdir of the dirs Join created, deepest first (EBUSY while a process
  // is still in one: logged, left).
  void Remove();
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  PodCgroup() = default;
  std::vector<std::string> dirs_;     // where the pids went, one per hierarchy
  std::vector<std::string> created_;  // dirs made here, in creation order
};

}  // namespace capsule::shim::task
