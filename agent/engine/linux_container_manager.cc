// Container registry with id reservation, so two concurrent creates of one
// id cannot both proceed, and removal that keeps a container whose teardown
// failed (it can be retried).
#include "agent/engine/linux_container_manager.h"

#include "agent/engine/cgroup2.h"
#include "agent/engine/pod_holder.h"
#include "agent/engine/rehearsal.h"
#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"

namespace capsule::engine {
namespace {
const log::Logger kLinuxContainerManagerLog("engine.sandbox");

// A container id names its cgroup directory: one path component.
Status CheckId(const std::string& id) {
  if (id.empty() || id.find('/') != std::string::npos || id == "." || id == "..")
    return InvalidArgument("invalid container id \"" + id + "\"");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<LinuxContainerManager>> LinuxContainerManager::Create(EngineOptions options, Reaper& reaper, CgroupManagerPtr cgroups) {
  if (!cgroups) {
    ASSIGN_OR_RETURN(cgroups, Cgroup2Manager::Open(options.cgroup_root));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ExitMonitor> exits, ExitMonitor::Create(reaper));
  ASSIGN_OR_RETURN(std::unique_ptr<OomWatcher> oom, OomWatcher::Create());
  std::string controllers;
  for (const auto& c : cgroups->AvailableControllers()) controllers += " " + c;
  kLinuxContainerManagerLog.Info("engine ready: cgroup root {}, controllers:{}", options.cgroup_root, controllers);
  return std::unique_ptr<LinuxContainerManager>(new LinuxContainerManager(std::move(options), std::move(cgroups), std::move(exits), std::move(oom)));
}

LinuxContainerManager::~LinuxContainerManager() {
  Status st = RemoveAll(options_.setup_timeout);
  if (!st.ok()) kLinuxContainerManagerLog.Error("sandbox teardown: {}", st.ToString());
}

Result<NamespaceFds> LinuxContainerManager::SharedNamespaces(const CreateOptions& options) const {
  if (options.share_namespaces_from.empty() || options.share_types.empty()) return NamespaceFds{};
  ASSIGN_OR_RETURN(ContainerPtr from, Get(options.share_namespaces_from));
  return from->ShareNamespaces(options.share_types);
}

Result<ContainerPtr> LinuxContainerManager::Create(const std::string& id, const oci::Spec& spec, const CreateOptions& options) {
  RETURN_IF_ERROR(CheckId(id));
  {
    std::lock_guard lock(mu_);
    if (containers_.count(id) || creating_.count(id)) return AlreadyExists("container " + id + " already exists");
    creating_.insert(id);
  }
  auto created = [&]() -> Result<std::shared_ptr<LinuxContainer>> {
    ASSIGN_OR_RETURN(NamespaceFds shared, SharedNamespaces(options));
    return LinuxContainer::Create(id, spec, options, std::move(shared), {*cgroups_, *exits_, *oom_, options_});
  }();
  std::lock_guard lock(mu_);
  creating_.erase(id);
  if (!created.ok()) return std::move(created).status().WithContext("create container " + id);
  containers_[id] = *created;
  return ContainerPtr(*created);
}

// The holder says "ready" on its stdout once it is confined and named, so
// no container joins it half set up; one that could not confine itself
// exits with the reason on its stderr.
Status LinuxContainerManager::AwaitHolderReady(LinuxContainer& holder) {
  ASSIGN_OR_RETURN(ProcessIoPtr io, holder.Io(""));
  const auto deadline = std::chrono::steady_clock::now() + options_.setup_timeout;
  const CancelCheck late([deadline] { return std::chrono::steady_clock::now() > deadline; });
  std::string said;
  while (said.size() < kPodHolderReady.size()) {
    auto r = io->Read(Stream::kStdout, kPodHolderReady.size() - said.size(), late);
    if (!r.ok()) return std::move(r).status().WithContext("the pod holder did not report ready");
    if (r->eof) break;
    said += r->data;
  }
  if (said == kPodHolderReady) return Status::Ok();
  std::string why;
  if (auto err = io->Read(Stream::kStderr, 1024, late); err.ok()) why = err->data;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  return Internal("the pod holder exited before it was ready" + (why.empty() ? std::string() : ": " + why));
}

Result<double> LinuxContainerManager::Rehearse() { return engine::Rehearse(*this, options_.pod_holder_exe, options_.setup_timeout); }

Status LinuxContainerManager::PreparePodHolder() {
  std::lock_guard holder(holder_mu_);
  return PrepareHolderLocked();
}

Status LinuxContainerManager::PrepareHolderLocked() {
  if (options_.pod_holder_exe.empty()) return FailedPrecondition("no agent binary to run as the pod holder");
  if (holder_ && holder_->state() == ContainerState::kRunning) return Status::Ok();
  if (holder_) {
    (void)holder_->Destroy(options_.setup_timeout);  // it died: a new one replaces it
    holder_.reset();
  }
  CreateOptions options;
  options.pod_holder = true;
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::shared_ptr<LinuxContainer> c,
                   LinuxContainer::Create(kPodHolderId, PodHolderSpec(options_.pod_holder_exe), options, {},
                                          {*cgroups_, *exits_, *oom_, options_}));
  if (auto pid = c->Start(); !pid.ok()) {
    (void)c->Destroy(options_.setup_timeout);
    return std::move(pid).status().WithContext("start the pod holder");
  }
  if (Status st = AwaitHolderReady(*c); !st.ok()) {
    (void)c->Destroy(options_.setup_timeout);
    return st;
  }
  kLinuxContainerManagerLog.Info(
      "pod holder ready in {} ms, pid {}",
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count(),
      c->init_pid());
  holder_ = std::move(c);
  return Status::Ok();
}

Result<ContainerPtr> LinuxContainerManager::AdoptPodHolder(const std::string& id) {
  RETURN_IF_ERROR(CheckId(id));
  std::lock_guard holder(holder_mu_);
  {
    std::lock_guard lock(mu_);
    if (containers_.count(id) || creating_.count(id)) return AlreadyExists("container " + id + " already exists");
  }
  if (!holder_ || holder_->state() != ContainerState::kRunning) {
    kLinuxContainerManagerLog.Info("no pod holder was ready for container {}: making one now", id);
    RETURN_IF_ERROR(PrepareHolderLocked());
  }
  std::shared_ptr<LinuxContainer> c = std::move(holder_);
  c->Rename(id);
  std::lock_guard lock(mu_);
  containers_[id] = c;
  return ContainerPtr(c);
}

Result<ContainerPtr> LinuxContainerManager::Get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end()) return NotFound("container " + id + " not found").WithReason(reason::kContainerNotFound);
  return ContainerPtr(it->second);
}

std::vector<ContainerPtr> LinuxContainerManager::List() const {
  std::lock_guard lock(mu_);
  std::vector<ContainerPtr> out;
  for (const auto& [id, c] : containers_) out.push_back(c);
  return out;
}

Status LinuxContainerManager::Remove(const std::string& id, std::chrono::milliseconds timeout) {
  std::shared_ptr<LinuxContainer> c;
  {
    std::lock_guard lock(mu_);
    auto it = containers_.find(id);
    if (it == containers_.end())
      return NotFound("container " + id + " not found").WithReason(reason::kContainerNotFound);
    c = it->second;
  }
  RETURN_IF_ERROR_CTX(c->Destroy(timeout), "remove container " + id);
  std::lock_guard lock(mu_);
  containers_.erase(id);
  kLinuxContainerManagerLog.Info("container {} removed", id);
  return Status::Ok();
}

Status LinuxContainerManager::RemoveAll(std::chrono::milliseconds timeout) {
  Status first = guest_->RemoveAll(timeout);
  {
    std::lock_guard holder(holder_mu_);
    if (holder_) {
      Status st = holder_->Destroy(timeout);
      if (!st.ok() && first.ok()) first = st.WithContext("remove the pod holder");
      holder_.reset();
    }
  }
  for (const auto& c : List()) {
    Status st = Remove(c->id(), timeout);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

std::optional<std::string> LinuxContainerManager::WaitOomEvent(std::chrono::milliseconds timeout) { return oom_->Next(timeout); }

}  // namespace capsule::engine
