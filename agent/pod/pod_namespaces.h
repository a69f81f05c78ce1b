// PodNamespaces: which container of the pod anchors the namespaces the
// others join, and what a new container joins. The rule:
//  - The sandbox container is the one whose spec says so with CRI's
//    annotation io.kubernetes.cri.container-type=sandbox; a container with
//    container-type=container must name that container in
//    io.kubernetes.cri.sandbox-id. Without the annotations (ctr, plain OCI
//    clients) the first container created in the sandbox is its anchor.
//  - Every other container joins the anchor's ipc and uts namespaces, and
//    its pid namespace when CreateContainer or CreateSandbox asked for
//    sandbox_pidns, or when the spec's pid entry has a path (CRI's way of
//    saying "the pod's pid namespace" with a path on the host).
//  - Namespace paths in a spec are the host's /proc/<pid>/ns/... and mean
//    nothing in the guest, so every path is dropped before the engine sees it.
// Pure bookkeeping, no system calls: unit-tested on its own.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::agent::pod {

enum class ContainerKind { kUnannotated, kSandbox, kContainer };

struct ContainerRole {
  ContainerKind kind = ContainerKind::kUnannotated;
  std::string sandbox_id;  // io.kubernetes.cri.sandbox-id, when given
};

// INVALID_ARGUMENT naming the annotation for a value CRI never writes.
Result<ContainerRole> RoleFromAnnotations(const oci::Spec& spec);

struct NamespaceJoinPlan {
  bool anchor = false;      // this container becomes the pod's anchor
  std::string share_from;   // the anchor's id, empty for the anchor itself
  std::vector<oci::NamespaceType> share_types;
};

class PodNamespaces {
 public:
  explicit PodNamespaces(bool sandbox_pidns) : sandbox_pidns_(sandbox_pidns) {}

  // What container `id` joins. FAILED_PRECONDITION when a second sandbox
  // container is announced, or a container names a sandbox this pod does
  // not have. Rewrites `spec`'s namespace paths (see above).
  Result<NamespaceJoinPlan> Plan(const std::string& id, const ContainerRole& role, bool request_pidns,
                                 oci::Spec* spec) const;
  // The container was created (with the plan Plan gave) or removed.
  void Created(const std::string& id, const NamespaceJoinPlan& plan);
  void Removed(const std::string& id);

  std::optional<std::string> anchor() const;

 private:
  const bool sandbox_pidns_;
  mutable std::mutex mu_;
  std::string anchor_;  // guarded by mu_; empty until the first container
};

}  // namespace capsule::agent::pod
