// GuestPod: the pod holder's adoption, container bookkeeping, and the
// teardown in order (containers, their storages, the pod's storages).
#include "agent/pod/guest_pod.h"

#include "agent/engine/pod_holder.h"
#include "runtime/common/logging.h"

namespace capsule::agent::pod {
namespace {

const log::Logger kGuestPodLog("pod");

// Unmounts newest first; reports the first failure but tries them all.
Status UnmountAll(std::vector<storage::MountedStorage>& mounts, const std::string& what) {
  Status first;
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
    Status st = it->Unmount();
    if (!st.ok()) {
      kGuestPodLog.Error("{}: {}", what, st.message());
      if (first.ok()) first = std::move(st).WithContext(what);
    }
  }
  mounts.clear();
  return first;
}

}  // namespace

GuestPod::GuestPod(PodIdentity identity, std::vector<storage::MountedStorage> mounts,
                   engine::ContainerManagerPtr engine)
    : identity_(std::move(identity)),
      engine_(std::move(engine)),
      namespaces_(identity_.sandbox_pidns),
      pod_mounts_(std::move(mounts)) {}

Result<pid_t> GuestPod::AdoptHolder(const std::string& container_id) {
  auto lock = SerializeCreation();
  oci::Spec no_spec;
  ASSIGN_OR_RETURN(NamespaceJoinPlan plan,
                   namespaces_.Plan(container_id, ContainerRole{ContainerKind::kSandbox, ""}, false, &no_spec));
  ASSIGN_OR_RETURN(engine::ContainerPtr holder, engine_->AdoptPodHolder(container_id));
  if (!identity_.hostname.empty()) {
    auto uts = holder->ShareNamespaces({oci::NamespaceType::kUts});
    Status st = uts.status();
    if (uts.ok()) {
      auto fd = uts->find(oci::NamespaceType::kUts);
      st = fd == uts->end() ? Internal("the engine gave no uts namespace")
                            : engine::SetHostnameIn(fd->second.get(), identity_.hostname);
    }
    if (!st.ok()) {
      (void)engine_->Remove(container_id, kDefaultRemoveTimeout);
      return st.WithContext("hostname of the pod holder");
    }
  }
  namespaces_.Created(container_id, plan);
  const pid_t pid = holder->init_pid();
  kGuestPodLog.Debug("container {} is the pod holder of sandbox {} (pid {}): no process created for it", container_id,
                    id(), pid);
  return pid;
}

void GuestPod::AddContainer(const std::string& id, std::vector<storage::MountedStorage> mounts,
                            const std::string& cri_name) {
  std::lock_guard lock(mu_);
  container_mounts_[id] = std::move(mounts);
  if (!cri_name.empty()) cri_names_[id] = cri_name;
}

Status GuestPod::ForgetContainer(const std::string& id) {
  namespaces_.Removed(id);
  {
    std::lock_guard lock(mu_);
    cri_names_.erase(id);
  }
  return UnmountContainerStorages(id);
}

std::map<std::string, std::string> GuestPod::CriNames() const {
  std::lock_guard lock(mu_);
  return cri_names_;
}

Status GuestPod::UnmountContainerStorages(const std::string& id) {
  std::vector<storage::MountedStorage> mounts;
  {
    std::lock_guard lock(mu_);
    auto it = container_mounts_.find(id);
    if (it == container_mounts_.end()) return Status::Ok();
    mounts = std::move(it->second);
    container_mounts_.erase(it);
  }
  return UnmountAll(mounts, "container " + id + " storage");
}

Status GuestPod::TearDown() {
  // A creation in flight finishes first, so nothing is created behind the
  // removal.
  auto lock = SerializeCreation();
  Status removed = engine_->RemoveAll(kDefaultRemoveTimeout);
  if (!removed.ok()) kGuestPodLog.Error("sandbox {}: removing the containers: {}", id(), removed.message());
  std::vector<std::string> ids;
  {
    std::lock_guard names(mu_);
    for (const auto& [cid, mounts] : container_mounts_) ids.push_back(cid);
  }
  Status unmounted;
  for (const auto& cid : ids) {
    Status st = UnmountContainerStorages(cid);
    if (!st.ok() && unmounted.ok()) unmounted = st;
  }
  std::vector<storage::MountedStorage> own;
  {
    std::lock_guard names(mu_);
    own.swap(pod_mounts_);
  }
  Status pod_unmounted = UnmountAll(own, "sandbox storage");
  kGuestPodLog.Info("sandbox {}: engine {}, {} container storages and {} of its own unmounted", id(),
                    removed.ok() ? "emptied" : "NOT emptied", ids.size(), identity_.mount_points.size());
  RETURN_IF_ERROR_CTX(removed, "remove containers");
  RETURN_IF_ERROR(unmounted);
  return pod_unmounted;
}

}  // namespace capsule::agent::pod
