// The steps a cold boot (boot.cc), a template build (vm_template.cc) and a
// clone's restore (restore.cc) share: planning a VM before anything starts,
// the VMM spec every pod VM is launched from, the host ends (vsock,
// virtiofsd), and the wait for the agent. Internal to capsule_vm.
#pragma once

#include <functional>
#include <string_view>

#include <chrono>
#include <string>

#include "runtime/common/status.h"
#include "runtime/config/config.h"
#include "runtime/hypervisor/vm_spec.h"
#include "runtime/vm/sandbox_vm.h"
#include "runtime/vm/sandbox_vm_impl.h"

namespace capsule::vm {

using BootClock = std::chrono::steady_clock;
double MsSince(BootClock::time_point t);

struct BootPlan {
  std::string id;
  std::string state_dir;
  uint32_t vcpus = 0;
  uint32_t memory_mib = 0;
};

// Id valid; size from the spec or guest.default_*, within guest.max_*;
// hypervisor.path executable; guest.kernel and guest.initrd readable; the
// state dir's socket paths fit. `state_dir` "": the VM dir of the id.
Result<BootPlan> Plan(const config::Config& config, const SandboxVmSpec& spec, std::string state_dir = "");

// The NIC plugged at boot for the pod's first interface: a locally
// administered MAC no pod has and a tap name of its own.
Result<hypervisor::NetDevice> BootNicDevice();

// What every pod VM's VMM is launched with: id, dir, size, kernel, initrd,
// command line, and an agent token of its own (agent_auth.h). The caller
// adds devices and the RAM backing.
Result<hypervisor::VmSpec> BaseVmmSpec(const config::Config& config, const BootPlan& plan, const SandboxVmSpec& spec);

// The QEMU id of every VM's vsock device (template and clone agree on it).
inline constexpr const char* kVsockDeviceId = "vsock0";
// Whether the vsock device is in a template from its boot and migrates into
// each clone (serial), or is hot-plugged into each clone after the restore
// (vhost-user and kernel vhost-vsock, which QEMU 7.2 cannot migrate).
inline bool VsockIsPartOfTheTemplate(const config::Config& config) {
  return config.vsock.backend == config::VsockBackendKind::kSerial;
}

inline bool IsDense(const config::Config& config) { return config.guest.device_set == config::DeviceSet::kDense; }

// capsule-vsockd (or a reserved CID) and, but for the dense device set,
// virtiofsd, set into `vm`.
Status PrepareHostEnds(SandboxVmImpl& vm, const config::Config& config, uint64_t guest_cid = 0);
hypervisor::Device VsockDeviceFor(vsock::VmVsock& v);
hypervisor::Device FsDeviceFor(SandboxVmImpl& vm);

// ConnectAgent until runtime.boot_timeout_ms counted from `start`, aborted
// at once (with the VMM's last words) when the VMM exits, and CANCELLED when
// `cancel_fd` (if >= 0) turns readable. The client's calls then get
// runtime.agent_timeout_ms.
// SandboxVmSpec::cgroup: the VM's host processes join it (none: nothing).
Status JoinSpecCgroup(SandboxVmImpl& vm, const std::string& cgroup);

Status WaitForAgent(SandboxVmImpl& vm, const config::Config& config, BootClock::time_point start, int cancel_fd);
// A hook for ConnectOptions::on_call_end that keeps the VM's agent call
// histograms in <state_dir>/agent-calls.json (call_stats.h) for the
// metrics endpoint; the VM's owner, and only it, sets one.
std::function<void(std::string_view rpc, double seconds, bool ok)> AgentCallStatsFor(const std::string& state_dir);

}  // namespace capsule::vm
