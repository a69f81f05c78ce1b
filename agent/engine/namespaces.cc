// Spec namespaces -> setns/unshare plan, and the child-side application.
#include "agent/engine/namespaces.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include "runtime/common/logging.h"

namespace capsule::engine {
namespace {

const log::Logger kNamespacesLog("engine.ns");

// setns order: joining the mount namespace last keeps the other paths,
// resolved in the parent, valid; user would come first but is unsupported.
constexpr oci::NamespaceType kJoinOrder[] = {oci::NamespaceType::kIpc, oci::NamespaceType::kUts,
                                             oci::NamespaceType::kPid, oci::NamespaceType::kCgroup,
                                             oci::NamespaceType::kTime, oci::NamespaceType::kMount};

void SortJoins(std::vector<NamespaceJoin>* joins) {
  std::vector<NamespaceJoin> sorted;
  for (oci::NamespaceType t : kJoinOrder) {
    for (auto& j : *joins) {
      if (j.type == t) sorted.push_back(std::move(j));
    }
  }
  *joins = std::move(sorted);
}

}  // namespace

int CloneFlag(oci::NamespaceType type) {
  switch (type) {
    case oci::NamespaceType::kPid: return CLONE_NEWPID;
    case oci::NamespaceType::kNetwork: return 0;
    case oci::NamespaceType::kMount: return CLONE_NEWNS;
    case oci::NamespaceType::kIpc: return CLONE_NEWIPC;
    case oci::NamespaceType::kUts: return CLONE_NEWUTS;
    case oci::NamespaceType::kUser: return CLONE_NEWUSER;
    case oci::NamespaceType::kCgroup: return CLONE_NEWCGROUP;
    case oci::NamespaceType::kTime: return CLONE_NEWTIME;
  }
  return 0;
}

const char* ProcNsName(oci::NamespaceType type) {
  switch (type) {
    case oci::NamespaceType::kPid: return "pid";
    case oci::NamespaceType::kNetwork: return "net";
    case oci::NamespaceType::kMount: return "mnt";
    case oci::NamespaceType::kIpc: return "ipc";
    case oci::NamespaceType::kUts: return "uts";
    case oci::NamespaceType::kUser: return "user";
    case oci::NamespaceType::kCgroup: return "cgroup";
    case oci::NamespaceType::kTime: return "time";
  }
  return "?";
}

bool NamespacePlan::Joins(oci::NamespaceType type) const {
  for (const auto& j : joins) {
    if (j.type == type) return true;
  }
  return false;
}

Result<NamespacePlan> PlanContainerNamespaces(const std::vector<oci::Namespace>& spec_namespaces,
                                              NamespaceFds overrides) {
  NamespacePlan plan;
  for (size_t i = 0; i < spec_namespaces.size(); ++i) {
    const oci::Namespace& ns = spec_namespaces[i];
    const std::string field = "linux.namespaces[" + std::to_string(i) + "]";
    if (ns.type == oci::NamespaceType::kNetwork) {
      kNamespacesLog.Debug("{}: network namespace ignored: containers share the VM's (the pod's) network", field);
      continue;
    }
    if (ns.type == oci::NamespaceType::kUser)
      return Unimplemented(field + ": user namespaces are not supported in the guest");
    if (overrides.count(ns.type)) continue;
    if (ns.path.empty()) {
      plan.unshare_flags |= CloneFlag(ns.type);
      continue;
    }
    UniqueFd fd(::open(ns.path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return ErrnoStatus(field + ".path: open " + ns.path);
    plan.joins.push_back({ns.type, std::move(fd), ns.path});
  }
  for (auto& [type, fd] : overrides) {
    plan.joins.push_back({type, std::move(fd), std::string("sandbox ") + ProcNsName(type) + " namespace"});
  }
  if (!plan.Creates(oci::NamespaceType::kMount)) {
    return InvalidArgument(plan.Joins(oci::NamespaceType::kMount)
                               ? "linux.namespaces: joining a mount namespace is not supported for a container"
                               : "linux.namespaces: a new mount namespace is required");
  }
  SortJoins(&plan.joins);
  return plan;
}

Result<NamespacePlan> PlanJoinAll(const NamespaceFds& init_namespaces) {
  NamespacePlan plan;
  for (const auto& [type, fd] : init_namespaces) {
    int dup = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
    if (dup < 0) return ErrnoStatus(std::string("dup ") + ProcNsName(type) + " namespace fd");
    plan.joins.push_back({type, UniqueFd(dup), std::string("container ") + ProcNsName(type) + " namespace"});
  }
  SortJoins(&plan.joins);
  return plan;
}

Result<NamespaceFds> OpenNamespaces(pid_t pid, const std::vector<oci::NamespaceType>& types) {
  NamespaceFds out;
  for (oci::NamespaceType t : types) {
    std::string p = "/proc/" + std::to_string(pid) + "/ns/" + ProcNsName(t);
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return ErrnoStatus("open " + p);
    out.emplace(t, std::move(fd));
  }
  return out;
}

Result<NamespaceFds> DupNamespaces(const NamespaceFds& fds, const std::vector<oci::NamespaceType>& types) {
  NamespaceFds out;
  for (oci::NamespaceType t : types) {
    auto it = fds.find(t);
    if (it == fds.end()) return NotFound(std::string("no ") + ProcNsName(t) + " namespace to share");
    int dup = ::fcntl(it->second.get(), F_DUPFD_CLOEXEC, 3);
    if (dup < 0) return ErrnoStatus(std::string("dup ") + ProcNsName(t) + " namespace fd");
    out.emplace(t, UniqueFd(dup));
  }
  return out;
}

Status EnterNamespaces(const NamespacePlan& plan) {
  for (const auto& j : plan.joins) {
    if (::setns(j.fd.get(), CloneFlag(j.type)) != 0)
      return ErrnoStatus(std::string("setns ") + ProcNsName(j.type) + " (" + j.source + ")");
  }
  if (plan.unshare_flags != 0 && ::unshare(plan.unshare_flags) != 0) return ErrnoStatus("unshare namespaces");
  return Status::Ok();
}

}  // namespace capsule::engine
