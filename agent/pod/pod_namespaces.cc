// The pod's namespace anchor and the joins of its containers.
#include "agent/pod/pod_namespaces.h"

#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"
#include "runtime/oci/annotations.h"

namespace capsule::agent::pod {
namespace {

const log::Logger kPodNamespacesLog("pod.namespaces");

// The spec asks for the pod's pid namespace: CRI's POD pid mode puts the
// sandbox's (host) /proc/<pid>/ns/pid path in the pid entry.
bool SpecJoinsPodPid(const oci::Spec& spec) {
  for (const auto& ns : spec.linux.namespaces) {
    if (ns.type == oci::NamespaceType::kPid && !ns.path.empty()) return true;
  }
  return false;
}

void DropHostPaths(const std::string& id, oci::Spec* spec) {
  for (auto& ns : spec->linux.namespaces) {
    if (ns.path.empty()) continue;
    kPodNamespacesLog.Debug("container {}: {} namespace path {} is the host's: ignored in the guest", id,
                            oci::NamespaceTypeName(ns.type), ns.path);
    ns.path.clear();
  }
}

}  // namespace

Result<ContainerRole> RoleFromAnnotations(const oci::Spec& spec) {
  ContainerRole role;
  const auto& a = spec.annotations;
  if (auto it = a.find(std::string(oci::kCriContainerType)); it != a.end()) {
    if (it->second == oci::kCriContainerTypeSandbox) {
      role.kind = ContainerKind::kSandbox;
    } else if (it->second == oci::kCriContainerTypeContainer) {
      role.kind = ContainerKind::kContainer;
    } else {
      return InvalidArgument("annotations[\"" + std::string(oci::kCriContainerType) + "\"]: \"" + it->second +
                             "\" is neither sandbox nor container");
    }
  }
  if (auto it = a.find(std::string(oci::kCriSandboxId)); it != a.end()) role.sandbox_id = it->second;
  if (role.kind == ContainerKind::kContainer && role.sandbox_id.empty()) {
    return InvalidArgument("annotations[\"" + std::string(oci::kCriSandboxId) +
                           "\"]: required for container-type container");
  }
  return role;
}

Result<NamespaceJoinPlan> PodNamespaces::Plan(const std::string& id, const ContainerRole& role, bool request_pidns,
                                              oci::Spec* spec) const {
  const bool wants_pod_pid = request_pidns || sandbox_pidns_ || SpecJoinsPodPid(*spec);
  DropHostPaths(id, spec);
  std::lock_guard lock(mu_);
  NamespaceJoinPlan plan;
  if (role.kind == ContainerKind::kSandbox) {
    if (!anchor_.empty()) {
      return FailedPrecondition("container " + id + " is annotated as the pod's sandbox, but container " + anchor_ +
                                " already is")
          .WithReason(reason::kSandboxContainerOrder);
    }
    plan.anchor = true;
    return plan;
  }
  if (role.kind == ContainerKind::kContainer && role.sandbox_id != anchor_) {
    return FailedPrecondition("container " + id + " belongs to sandbox container " + role.sandbox_id + ", but " +
                              (anchor_.empty() ? "no sandbox container exists" : "this pod's is " + anchor_))
        .WithReason(reason::kSandboxContainerOrder);
  }
  if (anchor_.empty()) {
    plan.anchor = true;  // unannotated: the first container anchors the pod
    return plan;
  }
  plan.share_from = anchor_;
  plan.share_types = {oci::NamespaceType::kIpc, oci::NamespaceType::kUts};
  if (wants_pod_pid) plan.share_types.push_back(oci::NamespaceType::kPid);
  return plan;
}

void PodNamespaces::Created(const std::string& id, const NamespaceJoinPlan& plan) {
  std::lock_guard lock(mu_);
  if (plan.anchor && anchor_.empty()) anchor_ = id;
}

void PodNamespaces::Removed(const std::string& id) {
  std::lock_guard lock(mu_);
  if (anchor_ == id) anchor_.clear();
}

std::optional<std::string> PodNamespaces::anchor() const {
  std::lock_guard lock(mu_);
  if (anchor_.empty()) return std::nullopt;
  return anchor_;
}

}  // namespace capsule::agent::pod
