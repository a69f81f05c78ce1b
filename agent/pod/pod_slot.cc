// PodSlot: validate everything, then modules -> storages -> hostname ->
// resolv.conf -> engine; a failure at any step unmounts what was mounted (in
// reverse) before the error goes back.
#include "agent/pod/pod_slot.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/reaper.h"
#include "runtime/common/reasons.h"

namespace capsule::agent::pod {
namespace {

const log::Logger kPodSlotLog("pod");

Status WriteResolvConf(const std::string& path, const std::vector<std::string>& dns) {
  ASSIGN_OR_RETURN(std::string text, ResolvConfFromDns(dns));
  std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) RETURN_IF_ERROR(MkdirAll(dir));
  return WriteFileAtomic(path, text, 0644);
}

}  // namespace

EngineFactory LinuxEngine(engine::EngineOptions options) {
  return [options]() -> Result<engine::ContainerManagerPtr> {
    ASSIGN_OR_RETURN(std::unique_ptr<engine::LinuxContainerManager> engine,
                     engine::LinuxContainerManager::Create(options, Reaper::Instance()));
    return engine::ContainerManagerPtr(std::move(engine));
  };
}

PodSlot::~PodSlot() {
  if (Status st = Destroy(); !st.ok()) kPodSlotLog.Error("pod teardown: {}", st.message());
  engine::ContainerManagerPtr idle;
  {
    std::lock_guard lock(mu_);
    idle.swap(idle_);
  }
  if (idle) (void)idle->RemoveAll(kDefaultRemoveTimeout);
}

Status PodSlot::Prepare() {
  {
    std::lock_guard lock(mu_);
    if (idle_ || pod_) return Status::Ok();
  }
  ASSIGN_OR_RETURN(engine::ContainerManagerPtr engine, engines_());
  Status holder = engine->PreparePodHolder();
  ReturnIdleEngine(std::move(engine));
  return holder.WithContext("pod holder");
}

Result<double> PodSlot::Rehearse(const std::vector<std::string>& storage_drivers) {
  std::lock_guard one_at_a_time(rehearse_mu_);
  (void)Prepare();  // a holder that failed is not the rehearsal's business
  std::vector<storage::StorageSpec> drivers;
  for (const std::string& d : storage_drivers) drivers.push_back(storage::StorageSpec{d, "", "", {}, ""});
  if (auto needed = storage::ModulesFor(drivers); !needed.empty() && env_.modules != nullptr)
    RETURN_IF_ERROR_CTX(env_.modules->Load(needed), "the storages' modules");
  {
    std::lock_guard lock(mu_);
    if (pod_) return FailedPrecondition(fmt::format("sandbox {} exists: a rehearsal comes before any", pod_->id()));
  }
  ASSIGN_OR_RETURN(engine::ContainerManagerPtr engine, TakeIdleEngine());
  auto ms = engine->Rehearse();
  ReturnIdleEngine(std::move(engine));
  return ms;
}

Status PodSlot::MountAhead(const std::vector<storage::StorageSpec>& specs) {
  std::lock_guard lifecycle(lifecycle_mu_);
  {
    std::lock_guard lock(mu_);
    if (pod_) return FailedPrecondition(fmt::format("sandbox {} exists: storages are mounted ahead of any", pod_->id()));
  }
  std::vector<MountedAhead> mounted;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (FindMountedAhead(specs[i]) != ahead_.end()) continue;
    auto m = storage::MountedStorage::Mount(specs[i]);
    if (!m.ok()) return std::move(m).status().WithContext(fmt::format("storages[{}]", i));
    mounted.push_back(MountedAhead{specs[i], std::move(m).value()});
  }
  for (auto& m : mounted) {
    kPodSlotLog.Info("storage {} {} mounted at {} ahead of the pod", m.spec.driver, m.spec.source, m.spec.mount_point);
    ahead_.push_back(std::move(m));
  }
  return Status::Ok();
}

std::vector<PodSlot::MountedAhead>::iterator PodSlot::FindMountedAhead(const storage::StorageSpec& spec) {
  return std::find_if(ahead_.begin(), ahead_.end(), [&](const MountedAhead& m) { return m.spec == spec; });
}

std::optional<storage::MountedStorage> PodSlot::TakeMountedAhead(const storage::StorageSpec& spec) {
  auto it = FindMountedAhead(spec);
  if (it == ahead_.end()) return std::nullopt;
  storage::MountedStorage taken = std::move(it->mounted);
  ahead_.erase(it);
  return taken;
}

Result<engine::ContainerManagerPtr> PodSlot::TakeIdleEngine() {
  engine::ContainerManagerPtr engine;
  {
    std::lock_guard lock(mu_);
    engine = std::move(idle_);
  }
  if (!engine) {
    ASSIGN_OR_RETURN(engine, engines_());
  }
  return engine;
}

void PodSlot::ReturnIdleEngine(engine::ContainerManagerPtr engine) {
  {
    std::lock_guard lock(mu_);
    if (!pod_ && !idle_) {
      idle_ = std::move(engine);
      return;
    }
  }
  (void)engine->RemoveAll(kDefaultRemoveTimeout);  // a pod took another meanwhile
}

Result<GuestPodPtr> PodSlot::Create(const PodSpec& spec) {
  RETURN_IF_ERROR(ValidatePodSpec(spec));
  std::lock_guard lifecycle(lifecycle_mu_);
  {
    std::lock_guard lock(mu_);
    if (pod_) return AlreadyExists(fmt::format("sandbox {} already exists", pod_->id()));
  }
  // Mounted storages unmount themselves if a later step fails.
  size_t mounted_ahead = 0;
  auto setup = [&]() -> Result<GuestPodPtr> {
    if (!spec.kernel_modules.empty()) {
      if (env_.modules == nullptr) return FailedPrecondition("kernel_modules: this agent has no module loader");
      RETURN_IF_ERROR_CTX(env_.modules->Load(spec.kernel_modules), "kernel_modules");
    }
    if (auto needed = storage::ModulesFor(spec.storages); !needed.empty() && env_.modules != nullptr)
      RETURN_IF_ERROR_CTX(env_.modules->Load(needed), "storages' modules");
    PodIdentity identity{spec.id, spec.hostname, spec.sandbox_pidns, {}};
    std::vector<storage::MountedStorage> mounts;
    for (size_t i = 0; i < spec.storages.size(); ++i) {
      if (auto ahead = TakeMountedAhead(spec.storages[i])) {
        // Debug: under TCG every console line costs the claim about a ms.
        kPodSlotLog.Debug("sandbox {}: storages[{}] at {} was mounted ahead of it", spec.id, i, ahead->mount_point());
        ++mounted_ahead;
        identity.mount_points.push_back(ahead->mount_point());
        mounts.push_back(std::move(*ahead));
        continue;
      }
      auto mounted = storage::MountedStorage::Mount(spec.storages[i]);
      if (!mounted.ok()) return std::move(mounted).status().WithContext(fmt::format("storages[{}]", i));
      identity.mount_points.push_back(mounted->mount_point());
      mounts.push_back(std::move(mounted).value());
    }
    if (!spec.hostname.empty() && env_.apply_hostname &&
        ::sethostname(spec.hostname.data(), spec.hostname.size()) != 0) {
      return ErrnoStatus("sethostname " + spec.hostname);
    }
    if (!spec.dns.empty()) RETURN_IF_ERROR_CTX(WriteResolvConf(env_.resolv_conf_path, spec.dns), "dns");
    auto engine = TakeIdleEngine();
    if (!engine.ok()) return std::move(engine).status().WithContext("container engine");
    return std::make_shared<GuestPod>(std::move(identity), std::move(mounts), std::move(engine).value());
  };
  auto pod = setup();
  if (!pod.ok()) return std::move(pod).status().WithContext("create sandbox " + spec.id);
  {
    std::lock_guard lock(mu_);
    pod_ = *pod;
  }
  kPodSlotLog.Debug("sandbox {} created ({} storages, {} of them mounted ahead, pidns={})", spec.id,
                   spec.storages.size(), mounted_ahead, spec.sandbox_pidns);
  return pod;
}

Status PodSlot::Destroy() {
  std::lock_guard lifecycle(lifecycle_mu_);
  GuestPodPtr pod;
  {
    std::lock_guard lock(mu_);
    pod.swap(pod_);  // new calls fail from here on
  }
  if (!pod) {
    kPodSlotLog.Info("destroy sandbox: none exists");
    return Status::Ok();
  }
  RETURN_IF_ERROR_CTX(pod->TearDown(), "destroy sandbox " + pod->id());
  kPodSlotLog.Info("sandbox {} destroyed", pod->id());
  return Status::Ok();
}

Result<GuestPodPtr> PodSlot::Current() const {
  std::lock_guard lock(mu_);
  if (!pod_) return FailedPrecondition("no sandbox: call CreateSandbox first").WithReason(reason::kNoSandbox);
  return pod_;
}

}  // namespace capsule::agent::pod
