// See task_manager.h.
#include "shim/task/task_manager.h"

#include <unistd.h>

#include "containerd/events/task.pb.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "shim/task/bundle_record.h"
#include "shim/task/host_namespaces.h"
#include "shim/task/vm_sizing.h"

namespace capsule::shim::task {
namespace {

const log::Logger kLog("shim.tasks");

Result<nlohmann::json> ReadSpec(const std::string& bundle) {
  const std::string path = bundle + "/config.json";
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  nlohmann::json spec = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) return InvalidArgument(path + ": not a JSON object");
  return spec;
}

std::map<std::string, std::string> Annotations(const nlohmann::json& spec) {
  std::map<std::string, std::string> out;
  auto it = spec.find("annotations");
  if (it == spec.end() || !it->is_object()) return out;
  for (const auto& [k, v] : it->items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace

TaskManager::~TaskManager() { StopAll(); }

Result<ContainerPtr> TaskManager::Create(const CreateParams& params) {
  if (!d_.config_error.ok()) return d_.config_error.WithContext("capsule configuration");
  {
    std::lock_guard lock(mu_);
    if (containers_.count(params.id) != 0 || creating_.count(params.id) != 0)
      return AlreadyExists("task " + params.id + " already exists");
    creating_.insert(params.id);
  }
  auto result = CreateReserved(params);
  ContainerPtr orphan;  // destroyed (unmounted, removed from the guest) after the lock is released
  std::lock_guard lock(mu_);
  creating_.erase(params.id);
  if (result.ok()) {
    // A container joining a pod took the pod's Sandbox before it was
    // created; if the pod's own container was deleted meanwhile, its VM
    // is stopping and the newcomer must not outlive it as a live task.
    const SandboxPtr& sb = (*result)->sandbox();
    auto it = sandboxes_.find(sb->id());
    if (it == sandboxes_.end() || it->second != sb) {
      orphan = std::move(*result);
      result = FailedPrecondition("container " + params.id + ": its sandbox " + sb->id() +
                                  " was deleted while the container was being created");
    } else {
      containers_[params.id] = *result;
      had_task_ = true;
    }
  }
  if (containers_.empty() && creating_.empty()) empty_since_ = std::chrono::steady_clock::now();
  return result;
}

Result<ContainerPtr> TaskManager::CreateReserved(const CreateParams& params) {
  ASSIGN_OR_RETURN(nlohmann::json spec, ReadSpec(params.bundle));
  const auto annotations = Annotations(spec);
  const auto type = annotations.find(kContainerTypeAnnotation);
  const bool joins_pod = type != annotations.end() && type->second == kContainerTypeContainer;
  std::string sandbox_id = params.id;
  if (joins_pod) {
    auto sid = annotations.find(kSandboxIdAnnotation);
    if (sid == annotations.end() || sid->second.empty())
      return InvalidArgument("container " + params.id + ": annotation " + kSandboxIdAnnotation + " is missing");
    sandbox_id = sid->second;
  }
  if (type != annotations.end() && type->second == kContainerTypeSandbox) {
    if (Status st = RefuseHostNamespaces(spec, params.id); !st.ok()) {
      kLog.Error("{}", st.message());
      return st;
    }
  }
  // The bundle names the VM before it is booted or adopted: a shim that
  // dies meanwhile still leaves `delete` enough to stop it.
  auto record = [bundle = params.bundle, cid = params.id, sandbox_id, config = d_.config_path](
                    const std::string& vm_id, const std::string& state_dir) {
    // SandboxVm::HostSharedPath(cid): the host's tree of the share.
    return WriteBundleRecord(bundle, {sandbox_id, vm_id, state_dir, state_dir + "/mounts/" + cid, config});
  };
  SandboxPtr sandbox;
  if (joins_pod) {
    {
      std::lock_guard lock(mu_);
      auto it = sandboxes_.find(sandbox_id);
      if (it == sandboxes_.end())
        return FailedPrecondition("container " + params.id + ": its sandbox " + sandbox_id +
                                  " does not run in this shim");
      sandbox = it->second;
    }
    RETURN_IF_ERROR(record(sandbox->vm_id(), sandbox->vm_state_dir()));
  } else {
    const bool cri_sandbox = type != annotations.end() && type->second == kContainerTypeSandbox;
    ASSIGN_OR_RETURN(sandbox, NewSandbox(sandbox_id, spec, annotations, cri_sandbox, record));
  }

  ContainerParams cp;
  cp.id = params.id;
  cp.bundle = params.bundle;
  cp.host_spec = std::move(spec);
  cp.rootfs = params.rootfs;
  cp.stdio = io::StdioSpec{params.stdin_path, params.stdout_path, params.stderr_path, params.terminal, params.id, d_.ns};
  cp.sandbox_container = !joins_pod;
  cp.on_exit = [this](const Process& p, const ExitInfo& e) { PublishExit(p, e); };
  auto c = Container::Create(std::move(cp), sandbox, d_.mounter);
  if (!c.ok()) {
    if (!joins_pod) {
      {
        std::lock_guard lock(mu_);
        sandboxes_.erase(sandbox_id);
      }
      (void)sandbox->Stop();
    }
    return std::move(c).status();
  }
  return ContainerPtr(std::move(*c));
}

Result<SandboxPtr> TaskManager::NewSandbox(const std::string& sandbox_id, const nlohmann::json& spec,
                                           const std::map<std::string, std::string>& annotations, bool cri_sandbox,
                                           RecordClaimedVm record) {
  WorkloadLimits limits;
  if (cri_sandbox) {
    ASSIGN_OR_RETURN(limits, LimitsFromAnnotations(annotations));
  } else {
    limits = LimitsFromSpec(spec);
  }
  SandboxParams sp;
  sp.id = sandbox_id;
  sp.vm_id = VmIdFor(d_.ns, sandbox_id);
  sp.record = std::move(record);
  sp.claimant.ns = d_.ns;
  sp.claimant.sandbox_id = sandbox_id;
  if (auto n = annotations.find(kSandboxNameAnnotation); n != annotations.end()) {
    auto k = annotations.find(kSandboxNamespaceAnnotation);
    sp.claimant.pod = (k != annotations.end() ? k->second + "/" : "") + n->second;
  }
  sp.size = SizeVm(limits, d_.config.guest);
  for (const auto& note : sp.size.notes) kLog.Info("sandbox {}: {}", sandbox_id, note);
  sp.hostname = spec.value("hostname", "");
  sp.netns_path = PodNetnsPath(spec);
  if (auto linux = spec.find("linux"); linux != spec.end() && linux->is_object())
    sp.cgroups_path = linux->value("cgroupsPath", "");
  if (sp.netns_path.empty()) kLog.Info("sandbox {}: no network namespace path in the spec: the VM gets no NIC", sandbox_id);
  sp.on_oom = [this](const std::string& container_id) { PublishOom(container_id); };
  ASSIGN_OR_RETURN(SandboxPtr sandbox, Sandbox::Create(std::move(sp), *d_.vms));
  std::lock_guard lock(mu_);
  sandboxes_[sandbox_id] = sandbox;
  return sandbox;
}

Result<ContainerPtr> TaskManager::Get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = containers_.find(id);
  if (it == containers_.end()) return NotFound("task " + id + " not found");
  return it->second;
}

Result<ExitInfo> TaskManager::Delete(const std::string& id, const std::string& exec_id) {
  ASSIGN_OR_RETURN(ContainerPtr c, Get(id));
  if (!exec_id.empty()) return c->DeleteExec(exec_id);
  ASSIGN_OR_RETURN(ExitInfo exit, c->DeleteContainer());
  ForgetOoms(id);
  SandboxPtr last;
  {
    std::lock_guard lock(mu_);
    containers_.erase(id);
    if (containers_.empty() && creating_.empty()) empty_since_ = std::chrono::steady_clock::now();
    bool in_use = false;
    for (const auto& [cid, other] : containers_) in_use = in_use || other->sandbox() == c->sandbox();
    if (!in_use) {
      sandboxes_.erase(c->sandbox()->id());
      last = c->sandbox();
    }
  }
  if (last) {
    kLog.Info("sandbox {} has no containers left; stopping its VM", last->id());
    if (Status st = last->Stop(); !st.ok()) kLog.Error("sandbox {}: {}", last->id(), st.ToString());
  }
  return exit;
}

bool TaskManager::Empty() const {
  std::lock_guard lock(mu_);
  return containers_.empty() && creating_.empty();
}

std::optional<TaskManager::Idle> TaskManager::IdleFor() const {
  std::lock_guard lock(mu_);
  if (!containers_.empty() || !creating_.empty()) return std::nullopt;
  return Idle{std::chrono::steady_clock::now() - empty_since_, had_task_};
}

void TaskManager::StopAll() {
  std::map<std::string, ContainerPtr> containers;
  std::map<std::string, SandboxPtr> sandboxes;
  {
    std::lock_guard lock(mu_);
    containers.swap(containers_);
    sandboxes.swap(sandboxes_);
  }
  for (auto& [id, s] : sandboxes) {
    kLog.Warn("shim exiting with sandbox {} still running; stopping its VM", id);
    (void)s->Stop();
  }
  for (auto& [id, c] : containers) c->AbandonProcesses();
  containers.clear();
}

void TaskManager::PublishExit(const Process& p, const ExitInfo& exit) {
  PublishOomOfExit(p, exit);
  containerd::events::TaskExit ev;
  ev.set_container_id(p.container_id());
  ev.set_id(p.is_init() ? p.container_id() : p.exec_id());
  ev.set_pid(p.host_pid());
  ev.set_exit_status(exit.status);
  events::SetTimestamp(exit.exited_at_ns, ev.mutable_exited_at());
  d_.events->Publish(events::kTaskExit, ev);
}

void TaskManager::PublishOom(const std::string& container_id) {
  {
    std::lock_guard lock(oom_mu_);
    // The watcher fetched, late, the kill an exit already reported: that
    // one is dropped, later kills are reported again.
    if (oom_at_exit_.erase(container_id) != 0) return;
    oom_reported_.insert(container_id);
  }
  containerd::events::TaskOOM ev;
  ev.set_container_id(container_id);
  d_.events->Publish(events::kTaskOOM, ev);
}

void TaskManager::PublishOomOfExit(const Process& p, const ExitInfo& exit) {
  if (!exit.oom_killed) return;
  {
    std::lock_guard lock(oom_mu_);
    // The watcher already reported this kill: consume that report.
    if (oom_reported_.erase(p.container_id()) != 0) return;
    oom_at_exit_.insert(p.container_id());
  }
  kLog.Info("{} was OOM-killed before the OOM watcher reported it; publishing /tasks/oom with its exit", p.Name());
  containerd::events::TaskOOM ev;
  ev.set_container_id(p.container_id());
  d_.events->Publish(events::kTaskOOM, ev);
}

void TaskManager::ForgetOoms(const std::string& container_id) {
  std::lock_guard lock(oom_mu_);
  oom_reported_.erase(container_id);
  oom_at_exit_.erase(container_id);
}

}  // namespace capsule::shim::task
