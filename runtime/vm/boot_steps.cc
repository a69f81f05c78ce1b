// See boot_steps.h.
#include "runtime/vm/boot_steps.h"

#include "runtime/agentclient/call_stats.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"
#include "runtime/host/daemon.h"
#include "runtime/host/process_cgroup.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vmm_user.h"
#include "runtime/vm/vm_dir.h"
#include "runtime/wire/agent_auth.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
const log::Logger kBootStepsLog("vm");

// The serial console's last lines, for errors about a guest that never answered.
constexpr size_t kConsoleTailBytes = 3000;
// How long a VMM whose exit fd fired may take to report its exit (QMP's last events).
constexpr milliseconds kExitReportWait{3000};
// The VM's device ids (kVsockDeviceId: boot_steps.h).
constexpr const char* kFsDeviceId = "fs0";

Status CheckFile(const std::string& path, std::string_view key) {
  if (path.empty()) return InvalidArgument(fmt::format("{} is not set", key));
  if (::access(path.c_str(), R_OK) != 0) return ErrnoStatus(fmt::format("{} {}", key, path));
  return Status::Ok();
}

uint32_t Pick(uint32_t asked, uint32_t fallback) { return asked != 0 ? asked : fallback; }

// The wait ended because the VMM exited: say so, with the console.
Status VmmDiedDuringBoot(SandboxVmImpl& vm) {
  auto exit = vm.vmm().WaitExit(kExitReportWait);
  std::string why = exit ? exit->Describe(vm.id()) : fmt::format("VM {}: QEMU exited", vm.id());
  return Unavailable("the VMM exited while the guest was booting: " + why).WithReason(reason::kVmmExited);
}

}  // namespace

double MsSince(BootClock::time_point t) {
  return std::chrono::duration<double, std::milli>(BootClock::now() - t).count();
}

Result<hypervisor::NetDevice> BootNicDevice() {
  unsigned char b[9];
  if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) return ErrnoStatus("getrandom for the boot NIC");
  b[0] = static_cast<unsigned char>((b[0] & 0xfe) | 0x02);
  hypervisor::NetDevice n;
  n.id = kBootNicDeviceId;
  n.mac = fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5]);
  n.tap_name = fmt::format("{}{:02x}{:02x}{:02x}", kBootNicTapPrefix, b[6], b[7], b[8]);
  return n;
}

Result<BootPlan> Plan(const config::Config& config, const SandboxVmSpec& spec, std::string state_dir) {
  RETURN_IF_ERROR(ValidateVmId(spec.id));
  BootPlan p{spec.id, state_dir.empty() ? SandboxVm::StateDirFor(config, spec.id) : std::move(state_dir),
             Pick(spec.vcpus, config.guest.default_vcpus), Pick(spec.memory_mib, config.guest.default_memory_mib)};
  if (p.vcpus > config.guest.max_vcpus)
    return InvalidArgument(fmt::format("vcpus {} exceeds guest.max_vcpus {}", p.vcpus, config.guest.max_vcpus));
  if (p.memory_mib > config.guest.max_memory_mib)
    return InvalidArgument(
        fmt::format("memory {} MiB exceeds guest.max_memory_mib {}", p.memory_mib, config.guest.max_memory_mib));
  if (::access(config.hypervisor.path.c_str(), X_OK) != 0)
    return ErrnoStatus(fmt::format("hypervisor.path {}", config.hypervisor.path));
  RETURN_IF_ERROR(CheckFile(config.guest.kernel, "guest.kernel"));
  RETURN_IF_ERROR(CheckFile(config.guest.initrd, "guest.initrd"));
  if (hypervisor::VmmUsersEnabled(config)) {
    RETURN_IF_ERROR(hypervisor::CheckVmmCanRead(config.hypervisor.path, "hypervisor.path", /*exec=*/true));
    RETURN_IF_ERROR(hypervisor::CheckVmmCanRead(config.guest.kernel, "guest.kernel"));
    RETURN_IF_ERROR(hypervisor::CheckVmmCanRead(config.guest.initrd, "guest.initrd"));
    if (!config.hypervisor.firmware.empty())
      RETURN_IF_ERROR(hypervisor::CheckVmmCanRead(config.hypervisor.firmware, "hypervisor.firmware"));
  }
  RETURN_IF_ERROR(CheckSocketPathsFit(p.state_dir));
  return p;
}

Result<hypervisor::VmSpec> BaseVmmSpec(const config::Config& config, const BootPlan& plan,
                                       const SandboxVmSpec& spec) {
  hypervisor::VmSpec s;
  s.id = plan.id;
  s.state_dir = plan.state_dir;
  s.vcpus = plan.vcpus;
  s.memory_mib = plan.memory_mib;
  s.kernel = config.guest.kernel;
  s.initrd = config.guest.initrd;
  s.kernel_cmdline = std::string(guest_abi::kBaseKernelCmdline);  // + hypervisor.kernel_params (the driver adds it)
  if (!config.guest.modules_allow.empty())
    s.kernel_cmdline += fmt::format(" {}={}", guest_abi::kModulesAllowParam, fmt::join(config.guest.modules_allow, ","));
  if (config.vsock.backend == config::VsockBackendKind::kSerial)
    s.kernel_cmdline += fmt::format(" {}", guest_abi::kSerialVsockParam);
  s.extra_kernel_params = spec.extra_kernel_params;
  if (IsDense(config)) {  // its containers' disks
    s.scsi_controller = true;
    s.kernel_cmdline += fmt::format(" {}", guest_abi::kScsiDisksParam);
  }
  ASSIGN_OR_RETURN(s.agent_token, agent_auth::NewToken());
  return s;
}

hypervisor::Device VsockDeviceFor(vsock::VmVsock& v) {
  hypervisor::VsockDevice d;
  d.id = kVsockDeviceId;
  if (v.kind() == config::VsockBackendKind::kVhost) {
    d.backend = hypervisor::VsockDevice::Backend::kVhostKernel;
    d.guest_cid = static_cast<uint32_t>(v.guest_cid());
    // The fd that holds the CID goes to QEMU: no moment where it is free.
    const auto& inherit = v.qemu_device().inherit_fds;
    if (!inherit.empty()) d.vhost_fd = inherit.front();
  } else {
    d.backend = v.kind() == config::VsockBackendKind::kSerial ? hypervisor::VsockDevice::Backend::kSerial
                                                              : hypervisor::VsockDevice::Backend::kVhostUser;
    d.socket_path = v.qemu_device().chardev_path;
  }
  return d;
}

hypervisor::Device FsDeviceFor(SandboxVmImpl& vm) {
  return hypervisor::FsShare{kFsDeviceId, vm.virtiofsd()->socket_path(), std::string(guest_abi::kSharedFsTag)};
}

Status PrepareHostEnds(SandboxVmImpl& vm, const config::Config& config, uint64_t guest_cid) {
  ASSIGN_OR_RETURN(vsock::VsockBackendPtr backend, vsock::MakeVsockBackend(config.vsock.backend));
  vsock::VmVsockSpec vs;
  vs.vm_dir = vm.state_dir();
  vs.device_id = kVsockDeviceId;
  vs.guest_cid = guest_cid;
  ASSIGN_OR_RETURN(vsock::VmVsockPtr v, backend->Prepare(vs));
  vm.SetVsock(std::move(v));
  if (IsDense(config)) {
    kBootStepsLog.Info("VM {}: vsock host end ({}, guest CID {}) ready; no virtiofsd (dense device set)", vm.id(),
                       config::VsockBackendName(vm.vsock()->kind()), vm.vsock()->guest_cid());
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(auto fs, virtiofs::VirtiofsDaemon::Start(virtiofs::VirtiofsOptions::FromConfig(config, vm.state_dir())));
  kBootStepsLog.Info("VM {}: vsock host end ({}, guest CID {}) and virtiofsd (pid {}) ready", vm.id(),
                     config::VsockBackendName(vm.vsock()->kind()), vm.vsock()->guest_cid(), fs->pid());
  vm.SetVirtiofsd(std::move(fs));
  return Status::Ok();
}

std::function<void(std::string_view rpc, double seconds, bool ok)> AgentCallStatsFor(const std::string& state_dir) {
  const std::string path = state_dir + "/" + agentclient::kCallStatsFile;
  auto stats = std::make_shared<agentclient::CallStats>([path](const std::string& json) {
    // Written as the first call of each RPC returns, on the pod's start path.
    if (Status st = WriteFileAtomic(path, json, 0600, Durability::kVolatile); !st.ok())
      kBootStepsLog.Debug("agent call stats: {}", st.ToString());
  });
  return [stats](std::string_view rpc, double seconds, bool ok) { stats->Record(rpc, seconds, ok); };
}

Status JoinSpecCgroup(SandboxVmImpl& vm, const std::string& cgroup) {
  if (cgroup.empty()) return Status::Ok();
  // The group outlives this handle: its owner made it, and only dirs this
  // handle created would be removed with it.
  return ProcessCgroup::Join(cgroup, vm.HostPids()).status().WithContext("VM " + vm.id() + ": join cgroup " + cgroup);
}

Status WaitForAgent(SandboxVmImpl& vm, const config::Config& config, BootClock::time_point boot_start, int cancel_fd) {
  agentclient::ConnectOptions o;
  o.on_call_end = AgentCallStatsFor(vm.state_dir());
  auto budget = milliseconds(config.runtime.boot_timeout_ms);
  o.deadline = std::max(milliseconds(1), budget - std::chrono::duration_cast<milliseconds>(BootClock::now() - boot_start));
  o.abort_fd = vm.vmm().exit_fd();
  o.cancel_fd = cancel_fd;
  o.token = vm.vmm().agent_token();
  o.default_call_timeout = milliseconds(config.runtime.agent_timeout_ms);
  vsock::VmVsock* v = vm.vsock();
  agentclient::Dialer dial = [v](milliseconds t) { return v->Dial(guest_abi::kAgentVsockPort, t); };
  kBootStepsLog.Info("VM {}: waiting up to {} ms for the agent on vsock port {}", vm.id(), o.deadline.count(),
                     guest_abi::kAgentVsockPort);
  agentclient::ConnectTimings last_try;
  o.timings = &last_try;
  auto client = agentclient::ConnectAgent(dial, o);
  if (client.ok()) {
    kBootStepsLog.Info("VM {}: the agent answered; its last try took: dial {:.0f} ms, token {:.0f} ms, Check {:.0f} ms",
                       vm.id(), last_try.dial_ms, last_try.token_ms, last_try.check_ms);
    vm.SetAgent(std::move(*client));
    return Status::Ok();
  }
  if (client.status().code() == Code::kAborted) return VmmDiedDuringBoot(vm);
  if (client.status().code() == Code::kCancelled) return client.status();
  std::string tail = ReadLogTail(hypervisor::VmPaths(vm.state_dir()).console_log(), kConsoleTailBytes);
  Status st = client.status().WithContext(fmt::format("runtime.boot_timeout_ms {}", config.runtime.boot_timeout_ms));
  if (tail.empty()) return st;
  return st.WithMessage(st.message() + "\n--- console tail ---\n" + tail);
}

}  // namespace capsule::vm
