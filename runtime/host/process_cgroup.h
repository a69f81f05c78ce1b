// ProcessCgroup: a VM's host processes (QEMU, virtiofsd, the vsock back
// end) moved into one cgroupfs path in every hierarchy: the pod sandbox's
// (linux.cgroupsPath, "/kubepods/.../pod<uid>/<sandbox id>"), so the kubelet
// sees the pod's real memory and CPU and a RuntimeClass overhead is
// enforced, in the cold and the warm path alike; or the warm pool's own
// (pool.cgroup) for idle VMs. cgroup v1 (every mounted controller
// hierarchy, the hybrid unified one too) and v2. Leaf dirs it made are
// removed once the processes are gone (after the VM stopped).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

class ProcessCgroup {
 public:
  // Moves `pids` (and their child processes) into `cgroups_path` under each
  // hierarchy mounted below `cgroup_root`. INVALID_ARGUMENT for a path that
  // is not an absolute cgroupfs path (systemd's "slice:prefix:name" is not
  // supported yet) or that climbs out with "..".
  static Result<std::unique_ptr<ProcessCgroup>> Join(const std::string& cgroups_path, const std::vector<pid_t>& pids,
                                                 const std::string& cgroup_root = "/sys/fs/cgroup");
  ~ProcessCgroup();  // Remove()
  ProcessCgroup(const ProcessCgroup&) = delete;
  ProcessCgroup& operator=(const ProcessCgroup&) = delete;

  // The group's CPU weight against its siblings, in cgroup v2 units
  // (1-10000, 100 the default): cpu.weight, or on a v1 cpu hierarchy
  // cpu.shares scaled (1024 per 100). A thread's nice ranks it only inside
  // its own group, so this is what makes a whole group yield. NOT_FOUND
  // when no hierarchy has a cpu controller here.
  Status SetCpuWeight(uint32_t weight);
  // rmdir of the dirs Join created, deepest first (EBUSY while a process
  // is still in one: logged, left).
  void Remove();
  // Also rmdir the path's own dir in each hierarchy when another process
  // made it (the pool's cgroup after a predecessor was killed).
  void RemoveOwnDirs();
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  ProcessCgroup() = default;
  std::vector<std::string> dirs_;     // where the pids went, one per hierarchy
  std::vector<std::string> created_;  // dirs made here, in creation order
};

}  // namespace capsule
