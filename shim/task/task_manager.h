// TaskManager: the shim's containers and pods. It decides where a new task
// goes — a CRI sandbox or an annotation-less container gets a new VM, a CRI
// container joins its pod's VM — keeps the id -> Container map, stops a VM
// once its last container is deleted, and turns process exits and OOM
// kills into events. The ttrpc handlers (shim/service) are thin calls into
// this and into Container/Process.
//
// A Create containerd gave up on is undone, never finished into a task
// nobody will delete. containerd 1.6 (runtime/v2/manager.go,
// TaskManager.Create) answers a failed or timed-out Create with Delete(id),
// Shutdown, closing the connection and `shim delete`, then forgets the
// task; ttrpc has no cancel message, so the shim learns it from the
// request's deadline (timeout_nano) or from that Delete. Each creation has
// a CancelToken: the deadline or the Delete cancels it, the boot or the
// agent's set-up calls end at once, and what was made is undone (a
// creation that had just finished too). The Delete waits for that.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/config/config.h"
#include "runtime/host/daemon.h"
#include "shim/events/publisher.h"
#include "shim/io/stdio_uri.h"
#include "shim/mount/mounter.h"
#include "shim/pod/cancel_token.h"
#include "shim/pod/sandbox.h"
#include "shim/pod/vm_provider.h"
#include "shim/task/container.h"

namespace capsule::shim::task {

// CRI's annotations (containerd pkg/cri/annotations).
inline constexpr const char* kContainerTypeAnnotation = "io.kubernetes.cri.container-type";
inline constexpr const char* kSandboxIdAnnotation = "io.kubernetes.cri.sandbox-id";
inline constexpr const char* kContainerTypeSandbox = "sandbox";
inline constexpr const char* kContainerTypeContainer = "container";
inline constexpr const char* kSandboxNameAnnotation = "io.kubernetes.cri.sandbox-name";
inline constexpr const char* kSandboxNamespaceAnnotation = "io.kubernetes.cri.sandbox-namespace";

struct TaskManagerDeps {
  std::string ns;
  config::Config config;
  // Why the config could not be loaded: every Create fails with it.
  Status config_error;
  std::string config_path;  // recorded in bundles for `delete`
  pod::VmProvider* vms = nullptr;
  mount::Mounter* mounter = nullptr;
  events::Publisher* events = nullptr;
};

// How long containerd's Delete of a task whose Create is still running
// waits for the creation to be undone: below containerd 1.6's 5 s
// io.containerd.timeout.shim.cleanup, so its Delete gets an answer. An undo
// that takes longer goes on, and the shim exits after it.
inline constexpr std::chrono::milliseconds kCancelledCreateWait{4000};

struct CreateParams {
  std::string id;
  std::string bundle;
  std::vector<mount::MountSpec> rootfs;
  bool terminal = false;
  std::string stdin_path, stdout_path, stderr_path;
  // containerd's deadline for this Create (the request's timeout_nano):
  // once it passes containerd has given up, and the creation is undone.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

class TaskManager {
 public:
  explicit TaskManager(TaskManagerDeps deps);
  ~TaskManager();  // StopAll()

  // ALREADY_EXISTS for a known id; the rest as Container::Create. Past
  // params.deadline, or once CancelCreation(id) ran, it fails with why
  // (DEADLINE_EXCEEDED, CANCELLED) and leaves nothing.
  Result<ContainerPtr> Create(const CreateParams& params);
  // containerd deletes (or shuts down) a task whose Create still runs only
  // after giving up on it: cancels that creation and waits up to
  // kCancelledCreateWait for it to be undone. No-op for any other id.
  void CancelCreation(const std::string& id, const Status& why);
  // NOT_FOUND naming the id.
  Result<ContainerPtr> Get(const std::string& id) const;
  // Signals a process in the guest. A SIGKILL to a pod holder that is the
  // last task of its pod (CRI's StopPodSandbox once the containers are
  // deleted) ends the VM instead, as killing pause ends a runc pod: nothing
  // in the guest needs the holder, and the guest call is saved. That end
  // comes back for the caller to run once containerd has the kill's answer
  // (the holder's exit is reported as the VM goes); otherwise null.
  Result<std::function<void()>> Kill(const std::string& id, const std::string& exec_id, uint32_t signal, bool all);
  // An exec, or the container (then its VM too when it was the pod's last).
  // The exit is answered at once. A container whose pod lives on leaves
  // its removal from the guest and its unmounts (30-35 ms under TCG, most
  // of a delete) for the caller to run once containerd has the answer
  // (`finish`; the pod's Stop waits for it); otherwise all is done here
  // and `finish` is null.
  struct Deleted {
    ExitInfo exit;
    std::function<void()> finish;
  };
  Result<Deleted> Delete(const std::string& id, const std::string& exec_id);
  bool Empty() const;
  // containerd's Shutdown: true when the shim may exit now (no task and no
  // creation left). With no task but creations running, those are ones
  // containerd forgot: they are cancelled, and IdleFor reports
  // shutdown_requested once they are undone.
  bool AcceptShutdown();
  // How long the shim has had no task and no creation in flight (since it
  // started, or since its last task was deleted); nullopt while it has one.
  // had_task: whether any task was ever created here (or a creation was
  // cancelled: containerd forgot it). shutdown_requested: containerd's
  // Shutdown came while creations were being undone.
  struct Idle {
    std::chrono::steady_clock::duration duration{};
    bool had_task = false;
    bool shutdown_requested = false;
  };
  std::optional<Idle> IdleFor() const;
  // Cancels every creation, stops every VM (so every blocked call returns)
  // and forgets everything.
  void StopAll();

  const TaskManagerDeps& deps() const { return d_; }

 private:
  // A Create in flight.
  struct Creation {
    pod::CancelTokenPtr cancel;
    bool done = false;  // guarded by mu_: undone or registered
  };
  // Create's work once the id is reserved.
  Result<ContainerPtr> CreateReserved(const CreateParams& params, const pod::CancelTokenPtr& cancel);
  // Takes the result of a creation in: registers the container, or (when
  // it was cancelled or its pod went meanwhile) returns what to undo.
  struct Undo {
    ContainerPtr container;
    pod::SandboxPtr sandbox;  // the container's own VM, stopped after it
  };
  Undo Settle(const CreateParams& params, const pod::CancelToken& cancel, Result<ContainerPtr>& result);
  Result<pod::SandboxPtr> NewSandbox(const std::string& sandbox_id, const nlohmann::json& spec,
                                const std::map<std::string, std::string>& annotations, bool cri_sandbox,
                                pod::RecordClaimedVm record, const pod::CancelTokenPtr& cancel);
  // The holder's sandbox, taken out of sandboxes_, when `holder` is the
  // only task of its pod and no creation is in flight; else null.
  pod::SandboxPtr TakeSandboxOfLoneHolder(const ContainerPtr& holder);
  // Run under a process's lock: they only queue.
  void PublishExit(const Process& process, const ExitInfo& exit);
  // From the sandbox's OOM watcher (GetOOMEvent).
  void PublishOom(const std::string& container_id);
  // An exit the agent marked OOM-killed carries its own /tasks/oom (queued
  // before /tasks/exit) unless the watcher already reported one: the
  // watcher's long poll can lose the race with the exit, and `ctr run --rm`
  // or CRI then delete the task and stop the VM before it is fetched.
  void PublishOomOfExit(const Process& process, const ExitInfo& exit);
  void ForgetOoms(const std::string& container_id);

  const TaskManagerDeps d_;
  // This daemon, as bundle records name it (pid 0 when /proc could not say).
  const ProcessIdentity self_;
  mutable std::mutex mu_;
  std::condition_variable creation_done_;  // a Creation became done
  std::map<std::string, std::shared_ptr<Creation>> creating_;  // guarded by mu_: by task id
  bool shutdown_requested_ = false;  // guarded by mu_: see AcceptShutdown
  std::map<std::string, ContainerPtr> containers_;  // guarded by mu_
  std::map<std::string, pod::SandboxPtr> sandboxes_;     // guarded by mu_: by sandbox id
  // guarded by mu_: when the shim last became empty (or started)
  std::chrono::steady_clock::time_point empty_since_ = std::chrono::steady_clock::now();
  bool had_task_ = false;  // guarded by mu_

  // Own lock: PublishExit runs under a process's lock, PublishOom on the
  // watcher's thread; neither takes mu_.
  std::mutex oom_mu_;
  std::set<std::string> oom_reported_;  // guarded by oom_mu_: by the watcher
  std::set<std::string> oom_at_exit_;   // guarded by oom_mu_: by an exit
};

}  // namespace capsule::shim::task
