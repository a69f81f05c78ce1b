// Sandbox: one pod = one VM. It boots the VM through a VmProvider, tells the
// agent about the pod (CreateSandbox: the virtio-fs share, the pod's
// /dev/shm), watches the agent for OOM kills, and is shared by the pod's
// containers (TaskManager stops it after the last one is deleted), and
// mirrors the pod's CNI interfaces into the VM (PodNetwork). A container run without
// CRI (`ctr run`) is a pod of one. Pause/resume of the pod stop and continue
// the whole VM (QMP stop/cont).
//
// Threads: the OOM watcher long-polls GetOOMEvent; the VM's exit callback
// (SandboxVm's thread) revokes the agent handle so every blocked call ends.
//
// An agent that does not answer a bounded call within runtime.agent_timeout_ms
// is taken as hung (AgentHandle::Call): a thread of the Sandbox revokes the
// agent and stops the VMM, which from there on is a VM that died: every
// process of the pod is reported killed (137), containerd's Delete removes
// the rest. A half-alive pod (the guest may have done what it did not
// answer) is never left running.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "runtime/host/process_cgroup.h"
#include "runtime/network/port_forward_listener.h"
#include "runtime/vm/sandbox_vm.h"
#include "shim/pod/agent_handle.h"
#include "shim/pod/cancel_token.h"
#include "shim/pod/pod_network.h"
#include "shim/pod/vm_provider.h"
#include "shim/pod/vm_sizing.h"

namespace capsule::shim::pod {

// One GetOOMEvent long poll; the watcher polls again after it.
inline constexpr std::chrono::milliseconds kOomPollTimeout{30000};
// How long a disk unplug waits for the guest to let the device go.
inline constexpr std::chrono::milliseconds kDiskUnplugTimeout{30000};

struct SandboxParams {
  std::string id;     // the pod's sandbox id (CRI), or the container's id
  std::string vm_id;  // for a cold boot: short, unique per namespace (VmIdFor)
  VmSize size;
  std::string hostname;
  // The pod's netns (PodNetnsPath): its interfaces are mirrored into the
  // VM. Empty: the VM gets no NIC.
  std::string netns_path;
  // Called with a container id when the guest OOM-killed one of its processes.
  std::function<void(const std::string& container_id)> on_oom;
  // The sandbox spec's linux.cgroupsPath: the VM's host processes go there.
  // Empty: they stay where the shim is.
  std::string cgroups_path;
  // Try the warm pool first (else: cold boot only).
  bool use_pool = true;
  PoolClaimant claimant;
  // The CRI sandbox container's id: the agent's pod holder becomes that
  // container at set-up (holder_pid()). Empty outside CRI: the first
  // container is created in the guest and anchors the pod.
  std::string holder_container_id;
  // CRI's pod name and namespace (annotations), for pod.json; "" outside CRI.
  std::string pod_name;
  std::string pod_namespace;
  // Records the VM this sandbox is about to own (id, state dir) in the
  // bundle before it is booted or adopted.
  RecordClaimedVm record;
  // runtime.agent_timeout_ms: the deadline of the agent's bounded calls.
  std::chrono::milliseconds agent_timeout = agentclient::kDefaultCallTimeout;
  // When set and cancelled while Create runs (containerd gave up on the
  // pod), the boot or the agent's set-up calls end at once and Create
  // fails with the token's reason, leaving no VM.
  CancelTokenPtr cancel;
};

// Where the time of a sandbox's start went (milliseconds).
// After the VM: the host's network half, then the one guest call with
// the boot NIC's take-over, the cgroup move and the port-forward listener
// beside it.
struct SandboxStartTimings {
  bool claimed = false;      // from the warm pool
  double vm_ms = 0;          // claim + adopt, or the cold boot
  double network_ms = 0;     // host: netns read, boot NIC check or hot-plugged taps
  double guest_ms = 0;       // guest: SetupSandbox (clock, RNG, sandbox, NICs, routes)
  uint64_t guest_calls = 0;  // guest round trips from the VM's hand-over to ready
  double boot_nic_ms = 0;    // host, beside the guest call: the boot NIC's tap moved and mirrored
  double beside_ms = 0;      // host, beside the guest call: cgroup move, port-forward listener
  double setup_ms = 0;       // all of the above after the VM, until ready
};

// A Sandbox's life, one state at a time (as containerd's runc shim keeps a
// process's): kCreating -> kReady <-> kPaused, then kStopping -> kStopped
// from any of them. Apart from it, two facts: the VMM exited (vm_gone,
// at any time) and why, if the shim stopped it (failed).
enum class SandboxState : uint8_t {
  kCreating,  // Create() has not finished: the pod is not in the guest yet
  kReady,     // the pod exists in the guest
  kPaused,    // the whole VM stopped (PauseVm)
  kStopping,  // Stop() began: the agent is being revoked and the VM quit
  kStopped,   // Stop() finished
};
std::string_view SandboxStateName(SandboxState s);

class Sandbox {
 public:
  // Boots the VM and creates the pod in the agent. On failure the VM is
  // stopped and nothing is left.
  static Result<std::shared_ptr<Sandbox>> Create(SandboxParams params, VmProvider& provider);
  ~Sandbox();  // Stop()
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  const std::string& id() const { return p_.id; }
  // The VM's, which for a VM claimed from the pool is the pool's id.
  const std::string& vm_id() const { return vm_id_; }
  const std::string& vm_state_dir() const { return vm_->state_dir(); }
  const SandboxStartTimings& start_timings() const { return timings_; }
  pid_t vmm_pid() const { return vmm_pid_; }
  // The guest pid of the pod holder that became the sandbox container
  // (SandboxParams::holder_container_id); 0 without one.
  uint32_t holder_pid() const { return holder_pid_; }
  const AgentHandlePtr& agent() const { return agent_; }
  SandboxState state() const { return watch_->state.load(); }
  // True once the VMM exited (stopped or crashed).
  bool vm_gone() const { return watch_->gone.load(); }
  // Stop() has begun: kStopping or kStopped.
  bool stopping() const { return watch_->Stopping(); }
  // vm_gone() as a callable that stays valid after the Sandbox is destroyed
  // (a Process, shared with in-flight Task calls, may outlive it): true once
  // the VMM exited or Stop() began.
  std::function<bool()> GoneProbe() const {
    return [w = watch_] { return w->gone.load() || w->Stopping(); };
  }

  std::string HostSharedPath(std::string_view rel) const;
  std::string GuestSharedPath(std::string_view rel) const;
  // False for the dense device set: containers' files come on disks.
  bool has_shared_fs() const { return vm_->has_shared_fs(); }
  // `image` as a read-only SCSI disk of the VM, handed to QEMU as an
  // fd (its jail need not see the path). Returns the serial the guest finds
  // it by, which is also its device id.
  Result<std::string> PlugDisk(const std::string& image);
  // Unplugs it on a thread of the Sandbox: a container's delete need not
  // wait for the VMM's device_del and blockdev-del. Stop() ends what is in
  // flight.
  void UnplugDiskLater(const std::string& serial);

  // "pod default/web (<id>)", or "pod <id>" without CRI's names: how
  // errors name the pod.
  const std::string& label() const { return label_; }
  // Whether the VM was stopped because its agent stopped answering.
  bool failed() const { return watch_->failed.load(); }

  // QMP stop/cont of the whole VM: kReady <-> kPaused (again in the state
  // it asks for: nothing to do); FAILED_PRECONDITION in any other state or
  // once the VMM is gone.
  Status PauseVm();
  Status ResumeVm();
  bool vm_paused() const { return state() == SandboxState::kPaused; }

  // Waits for the container deletes in flight (DeleteInFlight), revokes the
  // agent (ending every blocked call), stops the VMM and its helpers,
  // removes the VM's state. Idempotent.
  Status Stop();

  // A container's delete whose guest removal and host unmounts run after
  // containerd has its answer. Stop waits until every one is destroyed
  // before it revokes the agent: their unmounts need the guest's removal
  // done, and must come before the share's. Destroy it before the last
  // reference to the Sandbox goes (it holds one).
  class DeleteInFlight {
   public:
    explicit DeleteInFlight(std::shared_ptr<Sandbox> sandbox);
    ~DeleteInFlight();
    DeleteInFlight(DeleteInFlight&& other) noexcept = default;
    DeleteInFlight& operator=(DeleteInFlight&&) = delete;
    DeleteInFlight(const DeleteInFlight&) = delete;
    DeleteInFlight& operator=(const DeleteInFlight&) = delete;

   private:
    std::shared_ptr<Sandbox> sandbox_;
  };

  // The containers this shim has made in the VM (from the agent's
  // CreateContainer until its RemoveContainer): the only ones whose events
  // from the guest (OOM kills) are believed.
  void AddContainer(const std::string& id);
  void RemoveContainer(const std::string& id);
  bool HostsContainer(const std::string& id) const;
  // OOM reports from the guest that were not believed or over the rate.
  uint64_t ignored_ooms() const { return ignored_ooms_.load(); }

 private:
  Sandbox(SandboxParams params, vm::SandboxVmPtr vm);
  // Claims from the pool or cold-boots; says which in the log.
  static Result<vm::SandboxVmPtr> ObtainVm(const SandboxParams& p, VmProvider& provider, bool* claimed);
  void WritePodRecord() const;
  Status AttachNetwork();
  // The one guest call at start: a fresh clock and RNG (the VM may have
  // idled, paused, in the pool), the pod, its NICs and routes.
  Status SetupInGuest();
  // Not fatal: the pod runs, but its VM is not accounted to it (loudly).
  void JoinCgroup();
  // `kubectl port-forward` into the VM (runtime/network/port_forward_listener.h).
  // Not fatal: a pod whose host lacks nftables NAT runs without it (logged).
  void StartPortForward();
  void OomLoop();
  // The agent missed a deadline: revoke it and stop the VMM on fail_thread_
  // (the caller holds the agent handle's lock). Once per Sandbox.
  void FailInBackground(const Status& why);

  // What the VM's exit callback touches: shared with it, so the callback
  // never holds (and so never destroys) the Sandbox or its SandboxVm.
  struct VmWatch {
    std::atomic<SandboxState> state{SandboxState::kCreating};  // written under stop_mu_
    std::atomic<bool> gone{false};
    std::atomic<bool> failed{false};  // stopped for an unanswered agent call
    bool Stopping() const { return state.load() >= SandboxState::kStopping; }
    AgentHandlePtr agent;
    std::string vm_id;
  };

  const SandboxParams p_;
  const std::string label_;
  vm::SandboxVmPtr vm_;  // its methods are thread-safe
  std::string vm_id_;
  SandboxStartTimings timings_;
  pid_t vmm_pid_ = 0;
  uint32_t holder_pid_ = 0;  // set by SetupInGuest
  AgentHandlePtr agent_;
  std::shared_ptr<VmWatch> watch_ = std::make_shared<VmWatch>();
  std::thread oom_thread_;
  std::unique_ptr<PodNetwork> network_;  // removed beside the VMM's stop
  std::unique_ptr<network::PortForwardListener> port_forward_;  // stopped before the VM
  std::unique_ptr<ProcessCgroup> cgroup_;    // removed after the VMM stopped
  std::atomic<uint64_t> ignored_ooms_{0};  // OOM reports not believed or over the rate

  std::atomic<uint32_t> next_disk_{0};
  std::mutex unplug_mu_;
  std::vector<std::thread> unplugs_;  // guarded by unplug_mu_; joined by Stop()
  bool unplugs_closed_ = false;       // guarded by unplug_mu_: Stop() joined them, no more start

  mutable std::mutex containers_mu_;
  std::set<std::string> containers_;  // guarded by containers_mu_

  std::mutex deletes_mu_;
  std::condition_variable deletes_done_;
  int deletes_in_flight_ = 0;  // guarded by deletes_mu_

  std::mutex stop_mu_;  // serializes Stop, pause/resume and so the state's changes
  // state() from `from` to `to`, logged; the caller holds stop_mu_.
  void MoveLocked(SandboxState from, SandboxState to);

  // Not stop_mu_: FailInBackground runs inside agent calls that Stop's
  // Revoke waits for.
  std::mutex fail_mu_;
  std::thread fail_thread_;  // guarded by fail_mu_; joined by Stop
};
using SandboxPtr = std::shared_ptr<Sandbox>;

// "<id prefix>-<8 hex of sha256(ns/id)>": short enough for the unix socket
// paths under the VM's state dir (CRI ids are 64 hex digits), and distinct
// for equal ids in different containerd namespaces.
std::string VmIdFor(std::string_view ns, std::string_view sandbox_id);

}  // namespace capsule::shim::pod
