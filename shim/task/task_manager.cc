// See task_manager.h.
#include "shim/task/task_manager.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "containerd/events/task.pb.h"
#include "runtime/common/elapsed.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "shim/pod/host_namespaces.h"
#include "shim/pod/vm_sizing.h"
#include "shim/launcher/bundle_record.h"

namespace capsule::shim::task {
namespace {

const log::Logger kTaskManagerLog("shim.tasks");

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

namespace {

ProcessIdentity SelfIdentity() {
  auto self = IdentifyProcess(::getpid());
  if (self.ok()) return *self;
  kTaskManagerLog.Warn("bundle records will not name this shim ({}); delete then asks the group's socket",
                       self.status().ToString());
  return ProcessIdentity{0, 0, ""};
}

}  // namespace

TaskManager::TaskManager(TaskManagerDeps deps) : d_(std::move(deps)), self_(SelfIdentity()) {}

TaskManager::~TaskManager() { StopAll(); }

Result<ContainerPtr> TaskManager::Create(const CreateParams& params) {
  if (!d_.config_error.ok()) return d_.config_error.WithContext("capsule configuration");
  ASSIGN_OR_RETURN(pod::CancelTokenPtr cancel, pod::CancelToken::Make());
  auto op = std::make_shared<Creation>();
  op->cancel = cancel;
  {
    std::lock_guard lock(mu_);
    if (containers_.count(params.id) != 0 || creating_.count(params.id) != 0)
      return AlreadyExists("task " + params.id + " already exists");
    creating_[params.id] = op;
    shutdown_requested_ = false;  // a new task: containerd wants the shim after all
  }
  Result<ContainerPtr> result = InvalidArgument("not created");
  {
    std::optional<pod::CancelToken::Deadline> deadline;
    if (params.deadline) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*params.deadline -
                                                                            std::chrono::steady_clock::now());
      deadline.emplace(cancel, *params.deadline,
                       DeadlineExceeded(fmt::format("create task {}: containerd's deadline for it passed ({} ms after "
                                                    "the request came); containerd gave up on it, so it is undone",
                                                    params.id, std::max<int64_t>(ms.count(), 0))));
    }
    result = CreateReserved(params, cancel);
  }  // the deadline cannot fire after this point
  Undo undo = Settle(params, *cancel, result);
  // Undone outside the lock: unmount, remove from the guest, stop the VM.
  undo.container.reset();
  if (undo.sandbox) {
    kTaskManagerLog.Info("sandbox {}: stopping the VM of an abandoned creation", undo.sandbox->id());
    (void)undo.sandbox->Stop();
    undo.sandbox.reset();
  }
  std::lock_guard lock(mu_);
  op->done = true;
  creating_.erase(params.id);
  if (cancel->cancelled()) had_task_ = true;  // containerd forgot it: exit as after a last task
  if (containers_.empty() && creating_.empty()) empty_since_ = std::chrono::steady_clock::now();
  creation_done_.notify_all();
  return result;
}

TaskManager::Undo TaskManager::Settle(const CreateParams& params, const pod::CancelToken& cancel,
                                      Result<ContainerPtr>& result) {
  Undo undo;
  std::lock_guard lock(mu_);
  if (cancel.cancelled()) {
    const Status why = cancel.reason();
    if (result.ok()) {
      kTaskManagerLog.Warn("{}; the task was created just before and is undone", why.message());
      undo.container = std::move(*result);
    } else if (result.status() != why) {
      kTaskManagerLog.Warn("{} (the creation ended with: {})", why.message(), result.status().message());
    } else {
      kTaskManagerLog.Warn("{}", why.message());
    }
    result = why;
  } else if (result.ok()) {
    // A container joining a pod took the pod's Sandbox before it was
    // created; if the pod's own container was deleted meanwhile, its VM
    // is stopping and the newcomer must not outlive it as a live task.
    const pod::SandboxPtr& sb = (*result)->sandbox();
    auto it = sandboxes_.find(sb->id());
    if (it == sandboxes_.end() || it->second != sb) {
      undo.container = std::move(*result);
      result = FailedPrecondition("container " + params.id + ": its sandbox " + sb->id() +
                                  " was deleted while the container was being created");
    } else {
      containers_[params.id] = *result;
      had_task_ = true;
    }
  }
  // containerd never saw /tasks/create of an abandoned container: its end
  // is no event either.
  if (undo.container) undo.container->init()->DropEvents();
  // An abandoned container that made its own VM takes it along.
  if (undo.container && undo.container->sandbox_container()) {
    auto it = sandboxes_.find(undo.container->sandbox()->id());
    if (it != sandboxes_.end() && it->second == undo.container->sandbox()) {
      undo.sandbox = it->second;
      sandboxes_.erase(it);
    }
  }
  return undo;
}

void TaskManager::CancelCreation(const std::string& id, const Status& why) {
  std::shared_ptr<Creation> op;
  {
    std::lock_guard lock(mu_);
    auto it = creating_.find(id);
    if (it == creating_.end()) return;
    op = it->second;
  }
  op->cancel->Cancel(why);
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  if (creation_done_.wait_for(lock, kCancelledCreateWait, [&] { return op->done; })) {
    kTaskManagerLog.Info(
        "task {}: its creation was cancelled and undone in {} ms", id,
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
  } else {
    kTaskManagerLog.Warn("task {}: its cancelled creation is still being undone after {} ms; the shim exits once it is",
                         id, kCancelledCreateWait.count());
  }
}

Result<ContainerPtr> TaskManager::CreateReserved(const CreateParams& params, const pod::CancelTokenPtr& cancel) {
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
    if (Status st = pod::RefuseHostNamespaces(spec, params.id); !st.ok()) {
      kTaskManagerLog.Error("{}", st.message());
      return st;
    }
  }
  // The bundle names the VM before it is booted or adopted: a shim that
  // dies meanwhile still leaves `delete` enough to stop it.
  auto record = [bundle = params.bundle, cid = params.id, sandbox_id, config = d_.config_path, self = self_](
                    const std::string& vm_id, const std::string& state_dir) {
    // SandboxVm::HostSharedPath(cid): the host's tree of the share.
    return launcher::WriteBundleRecord(bundle, {sandbox_id, vm_id, state_dir, state_dir + "/mounts/" + cid, config, self.pid > 0 ? self.pid : 0,
                                      self.start_time, self.boot_id});
  };
  pod::SandboxPtr sandbox;
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
    ASSIGN_OR_RETURN(sandbox, NewSandbox(sandbox_id, spec, annotations, cri_sandbox, record, cancel));
  }
  // Giving up cuts the agent's CreateContainer of a new VM (the VM is
  // undone anyway); a container joining a pod gets its answer, bounded by
  // runtime.agent_timeout_ms, and is undone after it.
  std::optional<pod::CancelToken::Registration> on_cancel;
  if (!joins_pod) on_cancel.emplace(cancel->OnCancel([sandbox] { sandbox->agent()->Revoke(); }));

  ContainerParams cp;
  cp.id = params.id;
  cp.bundle = params.bundle;
  cp.host_spec = std::move(spec);
  cp.rootfs = params.rootfs;
  cp.image_cache_dir = d_.config.runtime.image_cache_dir;
  cp.image_cache_max_bytes = uint64_t{d_.config.runtime.image_cache_max_mib} << 20;
  cp.stdio = io::StdioSpec{params.stdin_path, params.stdout_path, params.stderr_path, params.terminal, params.id, d_.ns};
  cp.sandbox_container = !joins_pod;
  cp.on_exit = [this](const Process& p, const ExitInfo& e) { PublishExit(p, e); };
  auto c = cancel->cancelled() ? Result<std::unique_ptr<Container>>(cancel->reason())
                               : Container::Create(std::move(cp), sandbox, d_.mounter);
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

Result<pod::SandboxPtr> TaskManager::NewSandbox(const std::string& sandbox_id, const nlohmann::json& spec,
                                           const std::map<std::string, std::string>& annotations, bool cri_sandbox,
                                           pod::RecordClaimedVm record, const pod::CancelTokenPtr& cancel) {
  pod::WorkloadLimits limits;
  if (cri_sandbox) {
    ASSIGN_OR_RETURN(limits, pod::LimitsFromAnnotations(annotations));
  } else {
    limits = pod::LimitsFromSpec(spec);
  }
  pod::SandboxParams sp;
  sp.id = sandbox_id;
  sp.vm_id = pod::VmIdFor(d_.ns, sandbox_id);
  sp.record = std::move(record);
  sp.claimant.ns = d_.ns;
  sp.claimant.sandbox_id = sandbox_id;
  if (auto n = annotations.find(kSandboxNameAnnotation); n != annotations.end()) {
    auto k = annotations.find(kSandboxNamespaceAnnotation);
    sp.claimant.pod = (k != annotations.end() ? k->second + "/" : "") + n->second;
    sp.pod_name = n->second;
    if (k != annotations.end()) sp.pod_namespace = k->second;
  }
  sp.size = pod::SizeVm(limits, d_.config.guest);
  for (const auto& note : sp.size.notes) kTaskManagerLog.Info("sandbox {}: {}", sandbox_id, note);
  sp.hostname = spec.value("hostname", "");
  // CRI's sandbox container is the pause container: the guest has its own
  // holder for what pause holds, so no image and no process are needed.
  if (cri_sandbox) sp.holder_container_id = sandbox_id;
  sp.netns_path = pod::PodNetnsPath(spec);
  if (auto linux = spec.find("linux"); linux != spec.end() && linux->is_object())
    sp.cgroups_path = linux->value("cgroupsPath", "");
  if (sp.netns_path.empty())
    kTaskManagerLog.Info("sandbox {}: no network namespace path in the spec: the VM gets no NIC", sandbox_id);
  sp.on_oom = [this](const std::string& container_id) { PublishOom(container_id); };
  sp.agent_timeout = std::chrono::milliseconds(d_.config.runtime.agent_timeout_ms);
  sp.cancel = cancel;
  ASSIGN_OR_RETURN(pod::SandboxPtr sandbox, pod::Sandbox::Create(std::move(sp), *d_.vms));
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

Result<std::function<void()>> TaskManager::Kill(const std::string& id, const std::string& exec_id, uint32_t signal,
                                                bool all) {
  ASSIGN_OR_RETURN(ContainerPtr c, Get(id));
  ASSIGN_OR_RETURN(ProcessPtr p, c->Find(exec_id));
  // A second StopPodSandbox's kill while the first one's ends the VM: done.
  if (exec_id.empty() && c->pod_holder() && c->sandbox()->stopping()) return std::function<void()>();
  if (exec_id.empty() && signal == SIGKILL && c->pod_holder() && p->Snapshot().state == ProcessState::kRunning) {
    if (pod::SandboxPtr sb = TakeSandboxOfLoneHolder(c)) {
      kTaskManagerLog.Info(
          "sandbox {}: SIGKILL to its pod holder, the pod's last task: stopping the VM instead of signalling the guest",
          sb->id());
      return std::function<void()>([sb, p] {
        const auto t0 = std::chrono::steady_clock::now();
        // A failure is the stop's to log (as at Delete): the VMM is gone
        // whatever else was left, and the holder with it.
        if (Status st = sb->Stop(); !st.ok()) kTaskManagerLog.Error("sandbox {}: {}", sb->id(), st.ToString());
        p->Abandon(kKilledExitStatus);  // the watcher reported it already, as the agent went
        kTaskManagerLog.Info("sandbox {}: VM stopped {:.1f} ms after the kill's answer", sb->id(), MsSince(t0));
      });
    }
  }
  RETURN_IF_ERROR(p->Kill(signal, all));
  return std::function<void()>();
}

pod::SandboxPtr TaskManager::TakeSandboxOfLoneHolder(const ContainerPtr& holder) {
  std::lock_guard lock(mu_);
  if (!creating_.empty()) return nullptr;  // a container may be joining the pod
  for (const auto& [cid, other] : containers_)
    if (other != holder && other->sandbox() == holder->sandbox()) return nullptr;
  auto it = sandboxes_.find(holder->sandbox()->id());
  if (it == sandboxes_.end() || it->second != holder->sandbox()) return nullptr;
  // Out of the map first: a container created from now on finds no pod.
  pod::SandboxPtr sb = std::move(it->second);
  sandboxes_.erase(it);
  return sb;
}

Result<TaskManager::Deleted> TaskManager::Delete(const std::string& id, const std::string& exec_id) {
  ASSIGN_OR_RETURN(ContainerPtr c, Get(id));
  if (!exec_id.empty()) {
    ASSIGN_OR_RETURN(ExitInfo exit, c->DeleteExec(exec_id));
    return Deleted{exit, nullptr};
  }
  ASSIGN_OR_RETURN(ExitInfo exit, c->DeleteContainer());
  ForgetOoms(id);
  pod::SandboxPtr last;
  bool running = false;
  {
    std::lock_guard lock(mu_);
    containers_.erase(id);
    if (containers_.empty() && creating_.empty()) empty_since_ = std::chrono::steady_clock::now();
    bool in_use = false;
    for (const auto& [cid, other] : containers_) in_use = in_use || other->sandbox() == c->sandbox();
    if (!in_use) {
      auto it = sandboxes_.find(c->sandbox()->id());
      // Not there: its holder's kill stopped it (Stop then waits for that stop to end).
      running = it != sandboxes_.end() && it->second == c->sandbox();
      if (running) sandboxes_.erase(it);
      last = c->sandbox();
    }
  }
  if (!last) {
    // The pod goes on (CRI: its holder is still there): the rest after the
    // answer, with the pod's Stop waiting for it.
    return Deleted{exit, [c, in_flight = std::make_shared<pod::Sandbox::DeleteInFlight>(c->sandbox())]() mutable {
                     c->FinishDelete();
                     in_flight.reset();
                   }};
  }
  c->FinishDelete();
  if (running) kTaskManagerLog.Info("sandbox {} has no containers left; stopping its VM", last->id());
  if (Status st = last->Stop(); !st.ok()) kTaskManagerLog.Error("sandbox {}: {}", last->id(), st.ToString());
  return Deleted{exit, nullptr};
}

bool TaskManager::Empty() const {
  std::lock_guard lock(mu_);
  return containers_.empty() && creating_.empty();
}

bool TaskManager::AcceptShutdown() {
  std::vector<std::shared_ptr<Creation>> forgotten;
  {
    std::lock_guard lock(mu_);
    if (!containers_.empty()) return false;
    if (creating_.empty()) return true;
    shutdown_requested_ = true;
    for (const auto& [id, op] : creating_) forgotten.push_back(op);
  }
  kTaskManagerLog.Warn("containerd shut the shim down with {} creation(s) still running: cancelling them",
                       forgotten.size());
  for (const auto& op : forgotten)
    op->cancel->Cancel(Cancelled("containerd shut the shim down while the task was being created"));
  return false;
}

std::optional<TaskManager::Idle> TaskManager::IdleFor() const {
  std::lock_guard lock(mu_);
  if (!containers_.empty() || !creating_.empty()) return std::nullopt;
  return Idle{std::chrono::steady_clock::now() - empty_since_, had_task_, shutdown_requested_};
}

void TaskManager::StopAll() {
  std::map<std::string, ContainerPtr> containers;
  std::map<std::string, pod::SandboxPtr> sandboxes;
  std::vector<std::shared_ptr<Creation>> creating;
  {
    std::lock_guard lock(mu_);
    containers.swap(containers_);
    sandboxes.swap(sandboxes_);
    for (const auto& [id, op] : creating_) creating.push_back(op);
  }
  // A boot in flight would hold the shim's exit up for its whole timeout.
  for (const auto& op : creating) op->cancel->Cancel(Cancelled("the shim is stopping"));
  for (auto& [id, s] : sandboxes) {
    kTaskManagerLog.Warn("shim exiting with sandbox {} still running; stopping its VM", id);
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
  kTaskManagerLog.Info("{} was OOM-killed before the OOM watcher reported it; publishing /tasks/oom with its exit",
                       p.Name());
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
