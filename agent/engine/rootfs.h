// The container's filesystem view, planned in the parent from the spec
// (errors name the field) and built by the container child in its new mount
// namespace: propagation cut from the agent, rootfs bind, spec mounts,
// device nodes, pivot_root, masked and read-only paths, sysctls, hostname.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/common/mount_options.h"
#include "agent/engine/namespaces.h"
#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

struct MountPlan {
  std::string field;  // "mounts[3]", for errors
  std::string destination;
  std::string source;
  std::string type;
  MountOptions options;
  bool directory = true;  // mount point is a directory (else a file)
};

struct RootfsPlan {
  std::string rootfs;  // absolute
  bool readonly = false;
  unsigned long propagation = 0;  // rootfsPropagation for the new "/"; 0: rslave
  std::vector<MountPlan> mounts;
  std::vector<oci::LinuxDevice> devices;  // defaults + spec, by path
  bool dev_is_tmpfs = false;              // spec mounts a tmpfs on /dev
  std::vector<std::string> masked_paths;
  std::vector<std::string> readonly_paths;
  std::map<std::string, std::string> sysctl;
  std::string hostname;
  std::string domainname;
  std::string cwd;  // created if missing, like runc
};

// `rootfs` is root.path made absolute. `cgroup2` maps "cgroup" mounts to
// cgroup2 (a pure-v2 guest has no v1 hierarchies).
Result<RootfsPlan> PlanRootfs(const oci::Spec& spec, const std::string& rootfs, const NamespacePlan& ns,
                              bool cgroup2);

// Child side. Leaves the process chdir'ed at the new "/".
Status SetupRootfs(const RootfsPlan& plan);

// Child side, before pivot_root: device nodes and /dev symlinks.
Status CreateDevices(int root_fd, const RootfsPlan& plan);

// Child side, with absolute paths in the process's root: hides `path`
// (an empty read-only tmpfs on a directory, /dev/null on a file) or makes it
// read-only. A path that does not exist is left alone.
Status MaskPath(const std::string& path);
Status ReadonlyPath(const std::string& path);

// The devices every container gets (runtime-spec "Default Devices").
std::vector<oci::LinuxDevice> DefaultDevices();

}  // namespace capsule::engine
