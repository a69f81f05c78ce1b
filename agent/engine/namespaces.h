// Namespaces of a container process: which to create (unshare in the
// intermediate child that Launch (process_launch.h) forks first, so pid and
// time apply to the container process it then clones) and which to join (setns on fds opened by the
// parent, so a bad path fails before any fork). The VM is the pod, so the
// network namespace is always the VM's.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

// CLONE_NEWPID, ...; 0 for network (never created: the VM's network is the pod's).
int CloneFlag(oci::NamespaceType type);
// Entry name under /proc/<pid>/ns ("pid", "net", "mnt", ...).
const char* ProcNsName(oci::NamespaceType type);

struct NamespaceJoin {
  oci::NamespaceType type;
  UniqueFd fd;
  std::string source;  // for error messages
};

struct NamespacePlan {
  int unshare_flags = 0;
  std::vector<NamespaceJoin> joins;  // in setns order
  bool Creates(oci::NamespaceType type) const { return (unshare_flags & CloneFlag(type)) != 0; }
  bool Joins(oci::NamespaceType type) const;
  // The container gets its own or a joined namespace of this type.
  bool Has(oci::NamespaceType type) const { return Creates(type) || Joins(type); }
};

// Namespace fds another container offers to be joined (dup'ed in).
using NamespaceFds = std::map<oci::NamespaceType, UniqueFd>;

// From the spec's linux.namespaces. `overrides` replace the spec's entry for
// their type (a pod's containers joining the sandbox's pid/ipc/uts). Errors
// name the field: a user namespace is UNIMPLEMENTED, a missing mount
// namespace is INVALID_ARGUMENT, an unopenable path names it.
Result<NamespacePlan> PlanContainerNamespaces(const std::vector<oci::Namespace>& spec_namespaces,
                                              NamespaceFds overrides);

// For an exec: join every namespace the container init has (no new ones).
Result<NamespacePlan> PlanJoinAll(const NamespaceFds& init_namespaces);

// Opens /proc/<pid>/ns/* for the types the container owns; these fds keep
// the namespaces alive after the init exits (for later joins).
Result<NamespaceFds> OpenNamespaces(pid_t pid, const std::vector<oci::NamespaceType>& types);
Result<NamespaceFds> DupNamespaces(const NamespaceFds& fds, const std::vector<oci::NamespaceType>& types);

// Child side: setns every join, then unshare the new ones.
Status EnterNamespaces(const NamespacePlan& plan);

}  // namespace capsule::engine
