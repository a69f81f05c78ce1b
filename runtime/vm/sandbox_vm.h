// SandboxVm: one pod's VM with everything it is made of: its state dir
// (<runtime.state_dir>/vm/<id>/), the virtio-fs share served by virtiofsd, the
// vsock host end (capsule-vsockd or kernel vhost-vsock), the VMM (QEMU through
// the Hypervisor interface) and a connected AgentClient. Boot() cold-boots a
// VM; Adopt() takes over one another process booted and detached (the warm
// pool, or a shim's `delete` cleaning up after a dead shim). Destroying a
// SandboxVm stops everything and removes its files unless Detach() was called.
#pragma once

#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/agent/v1/agent.pb.h"
#include "runtime/agentclient/agent_client.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/config/config.h"
#include "runtime/hypervisor/hypervisor.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::vm {

struct SandboxVmSpec {
  std::string id;            // becomes the VM id and state dir name
  uint32_t vcpus = 0;        // 0: config guest.default_vcpus
  uint32_t memory_mib = 0;   // 0: config guest.default_memory_mib
  std::string extra_kernel_params;
  // When >= 0: readable once the caller gave up on this VM (containerd
  // forgot the pod); the wait for the guest's agent then ends at once with
  // CANCELLED and the boot is undone. Not owned.
  int cancel_fd = -1;
  // When set: the cgroupfs path (every hierarchy) the VM's host processes
  // join as soon as its VMM runs, before the guest's boot or the clone's
  // restore: the pool's, whose low CPU weight then covers a refill's work.
  std::string cgroup{};
};

// The NIC plugged at boot (config guest.boot_nic) for the pod's first
// interface: QEMU opened tap `tap_name` in its own netns (`vmm_netns`, a
// /proc/<pid>/ns/net path), the guest sees a NIC with MAC `mac` that no pod
// has used. The pod's network moves the tap into the pod's netns and has the
// agent give the NIC the pod's MAC; the tap goes when QEMU closes it.
struct BootNic {
  std::string device_id;
  std::string tap_name;
  std::string mac;
  std::string vmm_netns;
};

// Where the time of a cold boot or a restore went (milliseconds, wall clock).
struct BootTimings {
  bool restored = false;      // a clone of a template, not a boot
  double prepare_ms = 0;      // state dir, virtiofsd, vsock host end
  double ram_copy_ms = 0;     // restore: the template's RAM into the clone's
  double vmm_start_ms = 0;    // VMM process start until it takes commands
  double state_load_ms = 0;   // restore: device state loaded
  double hotplug_ms = 0;      // restore: vsock and virtio-fs devices added
  double agent_ready_ms = 0;  // guest running until the agent answered Check
  double total_ms = 0;
};

struct VmTemplate;

class SandboxVm {
 public:
  using ExitCallback = std::function<void(const hypervisor::VmExit&)>;

  // Cold boot: on failure nothing is left (no process, mount, socket, dir)
  // and the error carries the console tail when the guest got that far.
  static Result<std::unique_ptr<SandboxVm>> Boot(const config::Config& config, const SandboxVmSpec& spec);
  // A clone of `tpl` (vm_template.h): the template's RAM copied into memory
  // of the clone's own, its device state loaded, then the devices a
  // template cannot hold (vsock, virtio-fs) hot-plugged, a new VM
  // generation id and a vsock CID of its own, and the agent checked. The
  // spec's size must be the template's. On failure nothing is left, as
  // for Boot.
  static Result<std::unique_ptr<SandboxVm>> Restore(const config::Config& config, const SandboxVmSpec& spec,
                                                    const VmTemplate& tpl);
  // Takes over a detached VM from its state dir. A VM whose VMM died is
  // returned anyway (agent unreachable) so Stop() can clean it up.
  // `agent_stream`, when given: a stream to its agent opened ahead
  // (agentclient::OpenAgentStream, the pool's hand-over), used instead of
  // dialling; one that fails its Check is dropped and the agent dialled.
  static Result<std::unique_ptr<SandboxVm>> Adopt(const config::Config& config, const std::string& state_dir,
                                                  UniqueFd agent_stream = UniqueFd());
  static std::string StateDirFor(const config::Config& config, std::string_view id);

  virtual ~SandboxVm() = default;

  virtual const std::string& id() const = 0;
  virtual const std::string& state_dir() const = 0;
  virtual pid_t vmm_pid() const = 0;
  virtual hypervisor::Accelerator accelerator() const = 0;
  virtual const BootTimings& timings() const = 0;
  // The VM's host processes: the VMM, virtiofsd, the vsock back end (when
  // it is a process) — what belongs in the pod's cgroup.
  virtual std::vector<pid_t> HostPids() const = 0;
  // nullopt when the VM was booted without one (or its VMM is gone).
  virtual std::optional<BootNic> boot_nic() const = 0;

  // FAILED_PRECONDITION once the VM is gone.
  virtual Result<agentclient::AgentClient*> agent() = 0;
  // The VMM for pause/resume and hot-plug.
  virtual hypervisor::Vmm& vmm() = 0;

  // Where the host makes a path of the share (<state_dir>/mounts/<rel>, a
  // tree the guest cannot write; virtiofsd exports a read-only view of it,
  // see runtime/virtiofs/share_mount.h) and where the guest sees it
  // (/run/capsule/shared/<rel>).
  virtual std::string HostSharedPath(std::string_view rel = "") const = 0;
  virtual std::string GuestSharedPath(std::string_view rel = "") const = 0;
  // The storage to pass in CreateSandbox so the agent mounts the share.
  virtual agent::v1::Storage SharedFsStorage() const = 0;
  // The storage of the pod's /dev/shm (guest_abi::kPodShmGuestPath), the
  // same for every VM: CreateSandbox's, and the pool's Rehearse mounts it
  // ahead. Inline: the shim's pod code links no VM implementation.
  static agent::v1::Storage PodShmStorage() {
    agent::v1::Storage s;
    s.set_driver("tmpfs");
    s.set_source("shm");
    s.set_fstype("tmpfs");
    for (std::string_view o : {std::string_view("nosuid"), std::string_view("nodev"), std::string_view("noexec"),
                               std::string_view("mode=1777"), guest_abi::kPodShmSize})
      s.add_options(std::string(o));
    s.set_mount_point(std::string(guest_abi::kPodShmGuestPath));
    return s;
  }
  // The host's wall clock and kGuestReseedBytes from its CSPRNG: what the
  // claim's SetupSandbox (and the pool's rehearsal before it) make a VM
  // fresh with. Inline for the same reason as PodShmStorage.
  static Status HostFreshness(agent::v1::SetGuestTimeRequest* time, agent::v1::AddRandomnessRequest* randomness) {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    time->set_seconds(now.tv_sec);
    time->set_nanos(now.tv_nsec);
    std::string seed(guest_abi::kGuestReseedBytes, '\0');
    if (::getrandom(seed.data(), seed.size(), 0) != static_cast<ssize_t>(seed.size()))
      return ErrnoStatus("getrandom for the guest RNG's reseed");
    randomness->set_data(std::move(seed));
    return Status::Ok();
  }
  // Whether the VM has the share at all: false for the dense device set
  // (guest.device_set), whose containers' files come on erofs disks.
  virtual bool has_shared_fs() const = 0;

  // A connected byte stream to guest vsock port `port` (the agent's is
  // guest_abi::kAgentVsockPort). UNAVAILABLE when nothing listens there.
  virtual Result<UniqueFd> DialGuest(uint32_t port, std::chrono::milliseconds timeout) = 0;

  // Called once, on an internal thread, when the VMM exits for any reason
  // (Stop() included). Do not destroy the SandboxVm from inside it.
  virtual void OnExit(ExitCallback callback) = 0;

  // Agent DestroySandbox(power_off) and up to `graceful` for the guest to go,
  // then the VMM is stopped, virtiofsd and the vsock host end too, the state
  // dir removed. Idempotent.
  virtual Status Stop(std::chrono::milliseconds graceful) = 0;
  // Leaves everything running for Adopt().
  virtual Status Detach() = 0;
};
using SandboxVmPtr = std::unique_ptr<SandboxVm>;

}  // namespace capsule::vm
