// See container.h.
#include "shim/task/container.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>

#include "runtime/common/elapsed.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"
#include "shim/pod/agent_status.h"
#include "shim/task/dense_files.h"
#include "shim/task/image_cache.h"
#include "shim/task/process_limits.h"

namespace capsule::shim::task {
namespace {

const log::Logger kContainerLog("shim.container");
namespace v1 = agentclient::v1;
using agentclient::AgentClient;

// CRI's POD pid mode: the container's pid namespace names the sandbox's.
bool JoinsPodPidNamespace(const nlohmann::json& spec) {
  const auto linux = spec.find("linux");
  if (linux == spec.end() || !linux->is_object() || !linux->contains("namespaces")) return false;
  for (const auto& ns : (*linux)["namespaces"]) {
    if (ns.is_object() && ns.value("type", "") == "pid" && !ns.value("path", "").empty()) return true;
  }
  return false;
}

// Dense device set: the kubelet's termination-message files, from the
// guest back to the host, before the exit is reported. A failure is logged:
// the exit is reported anyway, with the host file as the container left it
// there (empty), as runc would leave a message the container never wrote.
void CopyBackTerminationMessages(const pod::AgentHandle& agent, const std::string& id,
                                 const std::vector<TerminationMessageFile>& files) {
  for (const TerminationMessageFile& f : files) {
    v1::ReadGuestFileRequest req;
    req.set_path(f.guest_path);
    req.set_max_bytes(kMaxTerminationMessageBytes);
    auto read = agent.Call<Result<v1::ReadGuestFileResponse>>([&](AgentClient& a) { return a.ReadGuestFile(req); });
    Status st = read.ok() ? WriteTerminationMessage(f.host_path, read->data()) : read.status();
    if (st.ok()) {
      kContainerLog.Info("container {}: termination message ({} bytes) copied from the guest to {}", id,
                         read->data().size(), f.host_path);
    } else {
      kContainerLog.Warn("container {}: termination message not copied to {}: {}", id, f.host_path, st.ToString());
    }
  }
}

}  // namespace

Result<std::unique_ptr<Container>> Container::Create(ContainerParams params, pod::SandboxPtr sandbox,
                                                     mount::Mounter* mounter) {
  std::unique_ptr<Container> c(new Container(std::move(params), std::move(sandbox)));
  pod::Sandbox* sb = c->sandbox_.get();
  ProcessParams pp;
  pp.container_id = c->p_.id;
  pp.host_pid = static_cast<uint32_t>(sb->vmm_pid());
  pp.stdio = c->p_.stdio;
  pp.agent = sb->agent();
  pp.vm_gone = sb->GoneProbe();  // never a raw Sandbox*: the Process may outlive it
  pp.on_exit = c->p_.on_exit;
  pp.before_exit = [files = c->termination_files_, agent = sb->agent(), id = c->p_.id] {
    CopyBackTerminationMessages(*agent, id, *files);
  };
  // CRI's sandbox (pause) container is the pod holder the agent adopted at
  // set-up: its image is not mounted and nothing is created in the guest.
  const bool held = c->p_.sandbox_container && sb->holder_pid() != 0;
  if (held) pp.running_guest_pid = sb->holder_pid();
  ASSIGN_OR_RETURN(c->init_, Process::Create(std::move(pp)));
  if (held) {
    c->in_agent_ = true;  // RemoveContainer ends the holder
    c->pod_holder_ = true;
    sb->AddContainer(c->p_.id);
    kContainerLog.Info("container {} is the pod holder in the guest (pid {}): no image mounted, no process created",
                       c->p_.id, sb->holder_pid());
    return c;
  }

  const auto t0 = std::chrono::steady_clock::now();
  const bool dense = !sb->has_shared_fs();
  GuestSpecInput in{c->p_.id, c->Rel("rootfs"), [sb, dense](std::string_view rel) {
                      return dense ? DenseGuestPath(rel) : sb->GuestSharedPath(rel);
                    }};
  ASSIGN_OR_RETURN(GuestSpec guest, MakeGuestSpec(c->p_.host_spec, in));
  for (const auto& note : guest.notes) kContainerLog.Info("container {}: {}", c->p_.id, note);
  // From here on ~Container undoes whatever was done.
  std::vector<v1::Storage> storages;
  if (dense) {
    ASSIGN_OR_RETURN(storages, c->PlugDense(mounter, &guest));
  } else {
    RETURN_IF_ERROR_CTX(c->MountRootfs(mounter, sb->HostSharedPath(c->Rel("rootfs"))), "rootfs of " + c->p_.id);
    RETURN_IF_ERROR_CTX(c->MountShares(mounter, guest.binds), "mounts of " + c->p_.id);
  }
  const auto t_files = std::chrono::steady_clock::now();
  const bool stdin_closed = c->init_->StdinClosedAtCreate();
  ASSIGN_OR_RETURN(v1::CreateContainerResponse agent,
                   c->CreateInAgent(guest.spec.dump(), std::move(storages), stdin_closed));
  // Its stdio is attached at start (Process::Start). The agent's own part
  // is logged here, on the host: a guest console line costs the guest about
  // a ms under TCG.
  auto ms = MsOfMicrosField;
  kContainerLog.Info("container {} created in {:.1f} ms: spec and host files {:.1f} ms, guest create {:.1f} ms (the "
                     "agent's {:.1f}: storages {:.1f} ms, plan {:.1f} ms, cgroup {:.1f} ms, fork to pid {:.1f} ms, "
                     "set-up to ready {:.1f} ms)",
                     c->p_.id, MsSince(t0), MsBetween(t0, t_files), MsSince(t_files), ms(agent.handled_us()),
                     ms(agent.storages_us()), ms(agent.plan_us()), ms(agent.cgroup_us()), ms(agent.fork_us()),
                     ms(agent.setup_us()));
  return c;
}

Container::~Container() {
  if (init_) init_->Abandon(kKilledExitStatus);  // wakes a Wait on a never-started init
  if (Status st = RemoveFromAgent(); !st.ok()) kContainerLog.Error("{}", st.ToString());
  execs_.clear();
  init_.reset();
  UnplugDisks();  // the guest unmounted them with the container
  if (Status st = UnmountAll(); !st.ok()) kContainerLog.Error("{}", st.ToString());
}

Status Container::MountRootfs(mount::Mounter* mounter, const std::string& target) {
  RETURN_IF_ERROR(MkdirAll(target, 0755));
  std::vector<mount::MountSpec> specs = p_.rootfs;
  // No mounts from containerd: the bundle's rootfs dir is the rootfs.
  if (specs.empty() && target == p_.bundle + "/rootfs") return Status::Ok();
  if (specs.empty()) specs.push_back({"bind", p_.bundle + "/rootfs", "", {"rbind"}});
  for (auto& m : specs) {
    m.target = target;
    ASSIGN_OR_RETURN(mount::ScopedMount sm, mount::ScopedMount::Make(mounter, m));
    mounts_.push_back(std::move(sm));
  }
  return Status::Ok();
}

Status Container::MountShares(mount::Mounter* mounter, const std::vector<ShareBind>& binds) {
  for (const auto& b : binds) {
    const std::string target = sandbox_->HostSharedPath(b.rel);
    RETURN_IF_ERROR(mount::MakeMountTarget(target, b.directory));
    mount::MountSpec m{"bind", b.host_source, target, {"rbind"}};
    for (const auto& o : b.options) {
      if (o == "ro") m.options.push_back("ro");
    }
    ASSIGN_OR_RETURN(mount::ScopedMount sm, mount::ScopedMount::Make(mounter, m));
    mounts_.push_back(std::move(sm));
  }
  return Status::Ok();
}

Result<std::vector<v1::Storage>> Container::PlugDense(mount::Mounter* mounter, GuestSpec* guest) {
  const std::string what = "files of " + p_.id + " (dense device set)";
  std::vector<v1::Storage> volumes = LocalVolumes(&guest->binds, &guest->spec);
  const std::vector<ShareBind>& binds = guest->binds;
  RETURN_IF_ERROR_CTX(RefuseSharedDirectories(binds), what);
  *termination_files_ = TerminationMessageFiles(binds);
  const auto start = std::chrono::steady_clock::now();
  // containerd's rootfs mounts go where runc's would; the image is made of them.
  const std::string tree = p_.bundle + "/rootfs";
  RETURN_IF_ERROR_CTX(MountRootfs(mounter, tree), "rootfs of " + p_.id);
  ASSIGN_OR_RETURN(DiskImage rootfs, RootfsImage(p_.image_cache_dir, RootfsCacheKey(p_.rootfs), tree, p_.id,
                                                     p_.image_cache_max_bytes));
  RETURN_IF_ERROR_CTX(PlugImage(rootfs.path, rootfs.own), what);
  const auto rootfs_done = std::chrono::steady_clock::now();
  if (!binds.empty()) {
    const std::string image = p_.bundle + "/mounts.erofs";
    RETURN_IF_ERROR(MountsImage(mounter, binds, p_.bundle + "/dense-mounts", p_.id, image));
    RETURN_IF_ERROR_CTX(PlugImage(image, true), what);
  }
  kContainerLog.Info("container {}: rootfs image {} ({}, {:.0f} ms){}{}; {:.0f} ms in all", p_.id, rootfs.path,
                     rootfs.built ? "built" : "cached", MsBetween(start, rootfs_done),
                     binds.empty() ? "" : fmt::format(", {} host mounts in an image of their own", binds.size()),
                     volumes.empty() ? "" : fmt::format(", {} emptyDir volumes in guest memory", volumes.size()),
                     MsSince(start));
  std::vector<v1::Storage> storages = DenseStorages(p_.id, disks_.front(), disks_.size() > 1 ? disks_[1] : "");
  for (auto& v : volumes) storages.push_back(std::move(v));
  return storages;
}

Status Container::PlugImage(const std::string& path, bool own) {
  auto serial = sandbox_->PlugDisk(path);
  // QEMU holds its own fd now (or failed): an image of the container's own
  // needs no name any more, so nothing of it can be left behind.
  if (own) ::unlink(path.c_str());
  if (!serial.ok()) return serial.status();
  disks_.push_back(*serial);
  return Status::Ok();
}

void Container::UnplugDisks() {
  for (const std::string& d : disks_) sandbox_->UnplugDiskLater(d);
  disks_.clear();
}

Result<v1::CreateContainerResponse> Container::CreateInAgent(const std::string& spec_json,
                                                             std::vector<v1::Storage> storages, bool stdin_closed) {
  v1::CreateContainerRequest req;
  req.set_container_id(p_.id);
  req.set_oci_spec_json(spec_json);
  req.set_stdin_closed(stdin_closed);
  for (auto& s : storages) *req.add_storages() = std::move(s);
  req.set_sandbox_pidns(JoinsPodPidNamespace(p_.host_spec));
  auto created = sandbox_->agent()->Call<Result<v1::CreateContainerResponse>>(
      [&](AgentClient& a) { return a.CreateContainer(req); });
  if (!created.ok()) return pod::FromAgent(created.status(), "create container " + p_.id);
  in_agent_ = true;
  sandbox_->AddContainer(p_.id);
  return created;
}

Status Container::RemoveFromAgent() {
  if (!in_agent_) return Status::Ok();
  in_agent_ = false;
  sandbox_->RemoveContainer(p_.id);
  // Went with its VM, or is going (a holder's kill stops the VM as its
  // exit is reported, so containerd's delete may come meanwhile).
  auto with_vm = [this] { return sandbox_->vm_gone() || sandbox_->stopping() || sandbox_->agent()->revoked(); };
  if (with_vm()) return Status::Ok();
  v1::RemoveContainerRequest req;
  req.set_container_id(p_.id);
  req.set_timeout(kRemoveTimeoutSeconds);
  Status st = sandbox_->agent()->Call<Status>([&](AgentClient& a) { return a.RemoveContainer(req); });
  if (st.code() == Code::kNotFound || with_vm()) return Status::Ok();
  return pod::FromAgent(st, "remove container " + p_.id + " from the guest");
}

Status Container::UnmountAll() {
  Status result;
  for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) {
    if (Status st = it->Unmount(); !st.ok() && result.ok()) result = st;
  }
  mounts_.clear();  // a mount that would not go is logged by its destructor
  if (Status st = RemoveAll(sandbox_->HostSharedPath(p_.id)); !st.ok() && result.ok()) result = st;
  return result;
}

Result<ProcessPtr> Container::Find(const std::string& exec_id) {
  if (exec_id.empty()) return init_;
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec_id);
  if (it == execs_.end()) return NotFound(fmt::format("exec {} of container {} not found", exec_id, p_.id));
  return it->second;
}

Result<ProcessPtr> Container::AddExec(const std::string& exec_id, const std::string& process_json,
                                      const io::StdioSpec& stdio) {
  if (exec_id.empty()) return InvalidArgument("exec of container " + p_.id + ": exec_id is empty");
  // Malformed JSON is the agent's to name; an oversized but valid process
  // is refused here, before its bytes go over the channel.
  if (auto process = nlohmann::json::parse(process_json, nullptr, /*allow_exceptions=*/false); process.is_object())
    RETURN_IF_ERROR(CheckProcessLimits(process, fmt::format("exec {} of container {}: process", exec_id, p_.id)));
  std::lock_guard lock(mu_);
  if (execs_.count(exec_id) != 0)
    return AlreadyExists(fmt::format("exec {} of container {} already exists", exec_id, p_.id));
  const ProcessState init_state = init_->Snapshot().state;
  if (deleted_ || init_state != ProcessState::kRunning)
    return FailedPrecondition(fmt::format("cannot exec in container {} in state {}", p_.id,
                                          deleted_ ? "deleted" : ProcessStateName(init_state)))
        .WithReason(reason::kWrongState);
  ProcessParams pp;
  pp.container_id = p_.id;
  pp.exec_id = exec_id;
  pp.process_json = process_json;
  pp.host_pid = static_cast<uint32_t>(sandbox_->vmm_pid());
  pp.stdio = stdio;
  pp.agent = sandbox_->agent();
  pp.vm_gone = sandbox_->GoneProbe();  // an exec may outlive the Sandbox too
  pp.on_exit = p_.on_exit;
  ASSIGN_OR_RETURN(ProcessPtr p, Process::Create(std::move(pp)));
  execs_[exec_id] = p;
  return p;
}

Result<ExitInfo> Container::DeleteExec(const std::string& exec_id) {
  ASSIGN_OR_RETURN(ProcessPtr p, Find(exec_id));
  ASSIGN_OR_RETURN(ExitInfo exit, p->Delete());
  std::lock_guard lock(mu_);
  execs_.erase(exec_id);
  return exit;
}

Result<ExitInfo> Container::DeleteContainer() {
  {
    std::lock_guard lock(mu_);
    if (deleted_) return NotFound("container " + p_.id + " was already deleted");
  }
  ASSIGN_OR_RETURN(ExitInfo exit, init_->Delete());
  std::lock_guard lock(mu_);
  deleted_ = true;
  return exit;
}

void Container::FinishDelete() {
  const auto t0 = std::chrono::steady_clock::now();
  // containerd considers the task gone: finish the clean-up whatever
  // fails, and report failures in the log only.
  if (Status st = RemoveFromAgent(); !st.ok()) kContainerLog.Error("{}", st.ToString());
  const auto t_guest = std::chrono::steady_clock::now();
  std::map<std::string, ProcessPtr> execs;
  {
    std::lock_guard lock(mu_);
    execs.swap(execs_);
  }
  // Killed with their container. A Wait on an exec that never started
  // (containerd waits before it starts one) would otherwise block for ever.
  for (auto& [exec_id, p] : execs) p->Abandon(kKilledExitStatus);
  execs.clear();  // their watchers return now that the guest container is gone
  UnplugDisks();
  if (Status st = UnmountAll(); !st.ok()) kContainerLog.Error("container {}: {}", p_.id, st.ToString());
  kContainerLog.Info("container {} removed in {:.1f} ms: from the guest {:.1f} ms, host clean-up {:.1f} ms", p_.id,
                     MsSince(t0), MsBetween(t0, t_guest), MsSince(t_guest));
}

void Container::AbandonProcesses() {
  std::map<std::string, ProcessPtr> execs;
  {
    std::lock_guard lock(mu_);
    execs = execs_;
  }
  for (auto& [exec_id, p] : execs) p->Abandon(kKilledExitStatus);
  init_->Abandon(kKilledExitStatus);
}

Result<v1::ListProcessesResponse> Container::Pids() {
  v1::ListProcessesRequest req;
  req.set_container_id(p_.id);
  auto r = sandbox_->agent()->Call<Result<v1::ListProcessesResponse>>(
      [&](AgentClient& a) { return a.ListProcesses(req); });
  if (!r.ok()) return pod::FromAgent(r.status(), "list processes of " + p_.id);
  return r;
}

Result<v1::StatsContainerResponse> Container::Stats() {
  v1::StatsContainerRequest req;
  req.set_container_id(p_.id);
  auto r = sandbox_->agent()->Call<Result<v1::StatsContainerResponse>>(
      [&](AgentClient& a) { return a.StatsContainer(req); });
  if (!r.ok()) return pod::FromAgent(r.status(), "stats of " + p_.id);
  return r;
}

Status Container::Update(const std::string& resources_json) {
  v1::UpdateContainerRequest req;
  req.set_container_id(p_.id);
  req.set_resources_json(resources_json);
  return pod::FromAgent(sandbox_->agent()->Call<Status>([&](AgentClient& a) { return a.UpdateContainer(req); }),
                        "update resources of " + p_.id);
}

Status Container::Pause() {
  {
    std::lock_guard lock(mu_);
    const ProcessState s = init_->Snapshot().state;
    if (deleted_ || s != ProcessState::kRunning || paused_ || pause_change_)
      return FailedPrecondition(fmt::format("cannot pause container {} in state {}", p_.id,
                                            pause_change_ ? "pausing or resuming"
                                            : paused_     ? "paused"
                                            : deleted_    ? "deleted"
                                                          : ProcessStateName(s)))
          .WithReason(reason::kWrongState);
    pause_change_ = true;  // the agent or QMP call runs without the lock (State answers meanwhile)
  }
  Status st;
  if (p_.sandbox_container) {
    st = sandbox_->PauseVm();
  } else {
    v1::PauseContainerRequest req;
    req.set_container_id(p_.id);
    st = pod::FromAgent(sandbox_->agent()->Call<Status>([&](AgentClient& a) { return a.PauseContainer(req); }),
                        "pause " + p_.id);
  }
  std::lock_guard lock(mu_);
  pause_change_ = false;
  if (st.ok()) paused_ = true;
  return st;
}

Status Container::Resume() {
  {
    std::lock_guard lock(mu_);
    if (!paused_ || pause_change_) {
      const ProcessState s = init_->Snapshot().state;
      return FailedPrecondition(fmt::format("cannot resume container {} in state {}", p_.id,
                                            pause_change_ ? "pausing or resuming"
                                            : deleted_    ? "deleted"
                                                          : ProcessStateName(s)))
          .WithReason(reason::kWrongState);
    }
    pause_change_ = true;
  }
  Status st;
  if (p_.sandbox_container) {
    st = sandbox_->ResumeVm();
  } else {
    v1::ResumeContainerRequest req;
    req.set_container_id(p_.id);
    st = pod::FromAgent(sandbox_->agent()->Call<Status>([&](AgentClient& a) { return a.ResumeContainer(req); }),
                        "resume " + p_.id);
  }
  std::lock_guard lock(mu_);
  pause_change_ = false;
  if (st.ok()) paused_ = false;
  return st;
}

bool Container::paused() const {
  std::lock_guard lock(mu_);
  return paused_ || sandbox_->vm_paused();
}

}  // namespace capsule::shim::task
