// SandboxManager: validate everything, then modules -> storages -> hostname
// -> resolv.conf -> observer; a failure at any step unmounts what was mounted
// (in reverse) before the error goes back.
#include "agent/sandbox/sandbox.h"

#include <algorithm>
#include <fmt/format.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"

namespace capsule::agent::sandbox {
namespace {

const log::Logger kLog("sandbox");

// Unmounts newest first; reports the first failure but tries them all.
Status UnmountAll(std::vector<storage::MountedStorage>& mounts) {
  Status first;
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
    Status st = it->Unmount();
    if (!st.ok()) {
      kLog.Error("{}", st.message());
      if (first.ok()) first = st;
    }
  }
  mounts.clear();
  return first;
}

Status WriteResolvConf(const std::string& path, const std::vector<std::string>& dns) {
  ASSIGN_OR_RETURN(std::string text, ResolvConfFromDns(dns));
  std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) RETURN_IF_ERROR(MkdirAll(dir));
  return WriteFileAtomic(path, text, 0644);
}

}  // namespace

void SandboxManager::SetObserver(SandboxObserver* observer) {
  std::lock_guard lock(mu_);
  observer_ = observer;
}

Status SandboxManager::Setup(const SandboxSpec& spec, Active& active) {
  if (!spec.kernel_modules.empty()) {
    if (env_.modules == nullptr) return FailedPrecondition("kernel_modules: this agent has no module loader");
    RETURN_IF_ERROR_CTX(env_.modules->Load(spec.kernel_modules), "kernel_modules");
  }
  if (auto needed = storage::ModulesFor(spec.storages); !needed.empty() && env_.modules != nullptr)
    RETURN_IF_ERROR_CTX(env_.modules->Load(needed), "storages' modules");
  for (size_t i = 0; i < spec.storages.size(); ++i) {
    auto mounted = storage::MountedStorage::Mount(spec.storages[i]);
    if (!mounted.ok()) return std::move(mounted).status().WithContext(fmt::format("storages[{}]", i));
    active.info.mount_points.push_back(mounted->mount_point());
    active.mounts.push_back(std::move(mounted).value());
  }
  if (!spec.hostname.empty() && env_.apply_hostname &&
      ::sethostname(spec.hostname.data(), spec.hostname.size()) != 0) {
    return ErrnoStatus("sethostname " + spec.hostname);
  }
  if (!spec.dns.empty()) RETURN_IF_ERROR_CTX(WriteResolvConf(env_.resolv_conf_path, spec.dns), "dns");
  if (observer_ != nullptr) RETURN_IF_ERROR_CTX(observer_->SandboxCreated(active.info), "container engine");
  return Status::Ok();
}

Status SandboxManager::Create(const SandboxSpec& spec) {
  RETURN_IF_ERROR(ValidateSandboxSpec(spec));
  std::lock_guard lock(mu_);
  if (active_) return AlreadyExists(fmt::format("sandbox {} already exists", active_->info.id));
  Active active;
  active.info = SandboxInfo{spec.id, spec.hostname, spec.sandbox_pidns, {}};
  Status st = Setup(spec, active);
  if (!st.ok()) {
    (void)UnmountAll(active.mounts);
    return std::move(st).WithContext("create sandbox " + spec.id);
  }
  kLog.Info("sandbox {} created ({} storages, pidns={})", spec.id, active.mounts.size(), spec.sandbox_pidns);
  active_ = std::move(active);
  return Status::Ok();
}

Status SandboxManager::Destroy() {
  std::lock_guard lock(mu_);
  if (!active_) {
    kLog.Info("destroy sandbox: none exists");
    return Status::Ok();
  }
  Status engine;
  if (observer_ != nullptr) {
    engine = observer_->SandboxDestroying(active_->info);
    if (!engine.ok()) kLog.Error("container engine teardown: {}", engine.message());
  }
  Status unmount = UnmountAll(active_->mounts);
  std::string id = active_->info.id;
  active_.reset();
  if (!engine.ok()) return std::move(engine).WithContext("destroy sandbox " + id + ": container engine");
  if (!unmount.ok()) return std::move(unmount).WithContext("destroy sandbox " + id);
  kLog.Info("sandbox {} destroyed", id);
  return Status::Ok();
}

std::optional<SandboxInfo> SandboxManager::Current() const {
  std::lock_guard lock(mu_);
  if (!active_) return std::nullopt;
  return active_->info;
}

}  // namespace capsule::agent::sandbox
