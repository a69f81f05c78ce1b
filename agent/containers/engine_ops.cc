// EngineOps: the sandbox's engine lifecycle and container lookups.
#include "agent/containers/engine_ops.h"

#include <fmt/format.h>

#include "agent/engine/linux_container_manager.h"
#include "runtime/common/logging.h"
#include "runtime/common/reaper.h"
#include "runtime/common/reasons.h"

namespace capsule::agent::containers {
namespace {
const log::Logger kLog("containers");
}  // namespace

EngineOps::EngineFactory EngineOps::LinuxEngine(engine::EngineOptions options) {
  return [options]() -> Result<engine::ContainerManagerPtr> {
    ASSIGN_OR_RETURN(std::unique_ptr<engine::LinuxContainerManager> sandbox, engine::LinuxContainerManager::Create(options, Reaper::Instance()));
    return engine::ContainerManagerPtr(std::move(sandbox));
  };
}

EngineOps::~EngineOps() {
  PodPtr pod;
  engine::ContainerManagerPtr prepared;
  {
    std::lock_guard lock(mu_);
    pod.swap(pod_);
    prepared.swap(prepared_);
  }
  if (pod) (void)pod->engine->RemoveAll(kDefaultRemoveTimeout);
  if (prepared) (void)prepared->RemoveAll(kDefaultRemoveTimeout);
}

Status EngineOps::Prepare() {
  {
    std::lock_guard lock(mu_);
    if (prepared_ || pod_) return Status::Ok();
  }
  ASSIGN_OR_RETURN(engine::ContainerManagerPtr engine, factory_());
  Status holder = engine->PreparePodHolder();
  std::lock_guard lock(mu_);
  if (!pod_ && !prepared_) prepared_ = std::move(engine);
  return holder.WithContext("pod holder");
}

Result<v1::RehearseResponse> EngineOps::Rehearse(const v1::RehearseRequest& req) {
  std::lock_guard one_at_a_time(rehearse_mu_);
  (void)Prepare();  // a holder that failed is not the rehearsal's business
  std::vector<storage::StorageSpec> drivers;
  for (const std::string& d : req.storage_drivers()) drivers.push_back(storage::StorageSpec{d, "", "", {}, ""});
  if (auto needed = storage::ModulesFor(drivers); !needed.empty() && modules_ != nullptr)
    RETURN_IF_ERROR_CTX(modules_->Load(needed), "Rehearse: the storages' modules");
  ASSIGN_OR_RETURN(engine::ContainerManagerPtr engine, TakeEngine("Rehearse: "));
  auto ms = engine->Rehearse();
  {
    std::lock_guard lock(mu_);
    if (!pod_ && !prepared_) prepared_ = std::move(engine);
  }
  if (!ms.ok()) return std::move(ms).status();
  kLog.Info("rehearsed a container's create, start and removal in {:.1f} ms", *ms);
  v1::RehearseResponse resp;
  resp.set_elapsed_ms(static_cast<uint32_t>(*ms + 0.5));
  return resp;
}

Result<engine::ContainerManagerPtr> EngineOps::TakeEngine(std::string_view who) {
  engine::ContainerManagerPtr engine;
  {
    std::lock_guard lock(mu_);
    if (pod_) return FailedPrecondition(fmt::format("{}sandbox {} still has a container engine", who, pod_->id));
    engine = std::move(prepared_);
  }
  if (!engine) {
    ASSIGN_OR_RETURN(engine, factory_());
  }
  return engine;
}

Status EngineOps::SandboxCreated(const sandbox::SandboxInfo& info) {
  ASSIGN_OR_RETURN(engine::ContainerManagerPtr engine, TakeEngine(""));
  std::lock_guard lock(mu_);
  if (pod_) return FailedPrecondition("sandbox " + pod_->id + " still has a container engine");
  pod_ = std::make_shared<Pod>(info.id, info.sandbox_pidns, std::move(engine));
  return Status::Ok();
}

Status EngineOps::SandboxDestroying(const sandbox::SandboxInfo& info) {
  PodPtr pod;
  {
    std::lock_guard lock(mu_);
    pod.swap(pod_);  // new container calls fail from here on
  }
  if (!pod) return Status::Ok();
  // A CreateContainer in flight finishes first, so nothing is created behind
  // the removal.
  std::lock_guard create(pod->create_mu);
  Status removed = pod->engine->RemoveAll(kDefaultRemoveTimeout);
  std::vector<std::string> ids;
  {
    std::lock_guard lock(pod->storages_mu);
    for (const auto& [id, mounts] : pod->storages) ids.push_back(id);
  }
  Status unmounted;
  for (const auto& id : ids) {
    Status st = UnmountStorages(*pod, id);
    if (!st.ok() && unmounted.ok()) unmounted = st;
  }
  kLog.Info("sandbox {}: {} container storages unmounted, engine {}", info.id, ids.size(),
            removed.ok() ? "emptied" : removed.ToString());
  RETURN_IF_ERROR_CTX(removed, "remove containers");
  return unmounted;
}

Result<EngineOps::PodPtr> EngineOps::CurrentPod() const {
  std::lock_guard lock(mu_);
  if (!pod_) return FailedPrecondition("no sandbox: call CreateSandbox first").WithReason(reason::kNoSandbox);
  return pod_;
}

Result<EngineOps::Target> EngineOps::Lookup(const std::string& container_id) const {
  ASSIGN_OR_RETURN(PodPtr pod, CurrentPod());
  ASSIGN_OR_RETURN(engine::ContainerPtr c, pod->engine->Get(container_id));
  return Target{std::move(pod), std::move(c)};
}

Result<EngineOps::GuestTarget> EngineOps::LookupGuest() const {
  ASSIGN_OR_RETURN(PodPtr pod, CurrentPod());
  engine::GuestProcesses* guest = pod->engine->Guest();
  if (guest == nullptr) return Unimplemented("this agent's engine cannot start processes outside the containers");
  return GuestTarget{std::move(pod), guest};
}

Result<engine::ProcessIoPtr> EngineOps::LookupIo(const std::string& container_id, const std::string& exec_id) const {
  if (container_id.empty()) {
    ASSIGN_OR_RETURN(GuestTarget g, LookupGuest());
    return g->Io(exec_id);
  }
  ASSIGN_OR_RETURN(Target t, Lookup(container_id));
  return t->Io(exec_id);
}

Status EngineOps::UnmountStorages(Pod& pod, const std::string& id) {
  std::vector<storage::MountedStorage> mounts;
  {
    std::lock_guard lock(pod.storages_mu);
    auto it = pod.storages.find(id);
    if (it == pod.storages.end()) return Status::Ok();
    mounts = std::move(it->second);
    pod.storages.erase(it);
  }
  Status first;
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
    Status st = it->Unmount();
    if (!st.ok() && first.ok()) first = std::move(st).WithContext("container " + id + " storage");
  }
  return first;
}

}  // namespace capsule::agent::containers
