// SandboxVm::Boot, a cold boot:
//   1. plan: id, size (spec or config defaults, within config max), kernel
//      and initrd present, socket paths fit -- before anything starts
//   2. state dir <runtime.state_dir>/vm/<id>/ (0700)
//   3. vsock host end (VsockBackend::Prepare: capsule-vsockd listening, or a
//      reserved CID), then virtiofsd with the shared-propagation share
//   4. the VMM (Hypervisor::Launch with the vsock and virtio-fs devices and,
//      with guest.boot_nic, a NIC on a tap in QEMU's own netns;
//      returns once QMP answers and the guest runs), VmVsock::OnQemuStarted
//   5. ConnectAgent over VmVsock::Dial(guest_abi::kAgentVsockPort) until
//      runtime.boot_timeout_ms from the start, aborted at once when the VMM's
//      exit fd fires or the spec's cancel fd does; the client's calls get
//      runtime.agent_timeout_ms
// Any failure stops what was started, in reverse order (SandboxVmImpl::Stop).
#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/common/daemon.h"
#include "runtime/common/file_util.h"
#include "runtime/common/guest_abi.h"
#include "runtime/common/logging.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/vm/sandbox_vm_impl.h"
#include "runtime/vm/vm_dir.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
const log::Logger kLog("vm");

// The serial console's last lines, for errors about a guest that never answered.
constexpr size_t kConsoleTailBytes = 3000;
// How long a VMM whose exit fd fired may take to report its exit (QMP's last events).
constexpr milliseconds kExitReportWait{3000};
// The VM's device ids.
constexpr const char* kVsockDeviceId = "vsock0";
constexpr const char* kFsDeviceId = "fs0";

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The boot NIC: a locally administered unicast MAC no pod has (the NIC's
// until the pod's interface gives it the veth's) and a tap name of its own.
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

struct BootPlan {
  std::string id;
  std::string state_dir;
  uint32_t vcpus = 0;
  uint32_t memory_mib = 0;
};

Status CheckFile(const std::string& path, std::string_view key) {
  if (path.empty()) return InvalidArgument(fmt::format("{} is not set", key));
  if (::access(path.c_str(), R_OK) != 0) return ErrnoStatus(fmt::format("{} {}", key, path));
  return Status::Ok();
}

uint32_t Pick(uint32_t asked, uint32_t fallback) { return asked != 0 ? asked : fallback; }

Result<BootPlan> Plan(const config::Config& config, const SandboxVmSpec& spec) {
  RETURN_IF_ERROR(ValidateVmId(spec.id));
  BootPlan p{spec.id, SandboxVm::StateDirFor(config, spec.id), Pick(spec.vcpus, config.guest.default_vcpus),
             Pick(spec.memory_mib, config.guest.default_memory_mib)};
  if (p.vcpus > config.guest.max_vcpus)
    return InvalidArgument(fmt::format("vcpus {} exceeds guest.max_vcpus {}", p.vcpus, config.guest.max_vcpus));
  if (p.memory_mib > config.guest.max_memory_mib)
    return InvalidArgument(
        fmt::format("memory {} MiB exceeds guest.max_memory_mib {}", p.memory_mib, config.guest.max_memory_mib));
  if (::access(config.hypervisor.path.c_str(), X_OK) != 0)
    return ErrnoStatus(fmt::format("hypervisor.path {}", config.hypervisor.path));
  RETURN_IF_ERROR(CheckFile(config.guest.kernel, "guest.kernel"));
  RETURN_IF_ERROR(CheckFile(config.guest.initrd, "guest.initrd"));
  RETURN_IF_ERROR(CheckSocketPathsFit(p.state_dir));
  return p;
}

hypervisor::Device VsockDeviceFor(vsock::VmVsock& v) {
  hypervisor::VsockDevice d;
  d.id = kVsockDeviceId;
  if (v.kind() == config::VsockBackendKind::kVhost) {
    d.backend = hypervisor::VsockDevice::Backend::kVhostKernel;
    d.guest_cid = static_cast<uint32_t>(v.guest_cid());
  } else {
    d.backend = hypervisor::VsockDevice::Backend::kVhostUser;
    d.socket_path = v.qemu_device().chardev_path;
  }
  return d;
}

Status PrepareHostEnds(SandboxVmImpl& vm, const config::Config& config) {
  ASSIGN_OR_RETURN(vsock::VsockBackendPtr backend, vsock::MakeVsockBackend(config.vsock.backend));
  vsock::VmVsockSpec vs;
  vs.vm_dir = vm.state_dir();
  vs.device_id = kVsockDeviceId;
  ASSIGN_OR_RETURN(vsock::VmVsockPtr v, backend->Prepare(vs));
  vm.SetVsock(std::move(v));
  ASSIGN_OR_RETURN(auto fs, virtiofs::VirtiofsDaemon::Start(virtiofs::VirtiofsOptions::FromConfig(config, vm.state_dir())));
  kLog.Info("VM {}: vsock host end ({}) and virtiofsd (pid {}) ready", vm.id(),
            config::VsockBackendName(vm.vsock()->kind()), fs->pid());
  vm.SetVirtiofsd(std::move(fs));
  return Status::Ok();
}

Status LaunchVmm(SandboxVmImpl& vm, const config::Config& config, const BootPlan& plan,
                 const SandboxVmSpec& spec, const std::string& fs_socket) {
  hypervisor::VmSpec s;
  s.id = plan.id;
  s.state_dir = plan.state_dir;
  s.vcpus = plan.vcpus;
  s.memory_mib = plan.memory_mib;
  s.kernel = config.guest.kernel;
  s.initrd = config.guest.initrd;
  s.kernel_cmdline = std::string(guest_abi::kBaseKernelCmdline);  // + hypervisor.kernel_params (the driver adds it)
  s.extra_kernel_params = spec.extra_kernel_params;
  s.devices = {hypervisor::FsShare{kFsDeviceId, fs_socket, std::string(guest_abi::kSharedFsTag)},
               VsockDeviceFor(*vm.vsock())};
  if (config.guest.boot_nic) {
    ASSIGN_OR_RETURN(hypervisor::NetDevice nic, BootNicDevice());
    s.devices.push_back(std::move(nic));
  }
  // The kernel back end reserves the CID on its own /dev/vhost-vsock fd,
  // but the driver cannot hand QEMU that fd (vhostfd=) yet: release the
  // reservation so QEMU's own open can take the CID.
  if (vm.vsock()->kind() == config::VsockBackendKind::kVhost) vm.vsock()->OnQemuStarted();
  ASSIGN_OR_RETURN(hypervisor::VmPtr vmm, hypervisor::NewQemuHypervisor(config)->Launch(s));
  vm.vsock()->OnQemuStarted();
  kLog.Info("VM {}: QEMU pid {} running ({}, {} vCPU, {} MiB)", plan.id, vmm->vmm_pid(),
            hypervisor::AcceleratorName(vmm->accelerator()), plan.vcpus, plan.memory_mib);
  vm.SetVmm(std::move(vmm));
  return Status::Ok();
}

// The wait ended because the VMM exited: say so, with the console.
Status VmmDiedDuringBoot(SandboxVmImpl& vm) {
  auto exit = vm.vmm().WaitExit(kExitReportWait);
  std::string why = exit ? exit->Describe(vm.id()) : fmt::format("VM {}: QEMU exited", vm.id());
  return Unavailable("the VMM exited while the guest was booting: " + why);
}

Status WaitForAgent(SandboxVmImpl& vm, const config::Config& config, Clock::time_point boot_start, int cancel_fd) {
  agentclient::ConnectOptions o;
  auto budget = milliseconds(config.runtime.boot_timeout_ms);
  o.deadline = std::max(milliseconds(1), budget - std::chrono::duration_cast<milliseconds>(Clock::now() - boot_start));
  o.abort_fd = vm.vmm().exit_fd();
  o.cancel_fd = cancel_fd;
  o.default_call_timeout = milliseconds(config.runtime.agent_timeout_ms);
  vsock::VmVsock* v = vm.vsock();
  agentclient::Dialer dial = [v](milliseconds t) { return v->Dial(guest_abi::kAgentVsockPort, t); };
  kLog.Info("VM {}: waiting up to {} ms for the agent on vsock port {}", vm.id(), o.deadline.count(),
            guest_abi::kAgentVsockPort);
  auto client = agentclient::ConnectAgent(dial, o);
  if (client.ok()) {
    vm.SetAgent(std::move(*client));
    return Status::Ok();
  }
  if (client.status().code() == Code::kAborted) return VmmDiedDuringBoot(vm);
  if (client.status().code() == Code::kCancelled) return client.status();
  std::string tail = ReadLogTail(hypervisor::VmPaths(vm.state_dir()).console_log(), kConsoleTailBytes);
  Status st = client.status().WithContext(fmt::format("runtime.boot_timeout_ms {}", config.runtime.boot_timeout_ms));
  if (tail.empty()) return st;
  return Status(st.code(), st.message() + "\n--- console tail ---\n" + tail);
}

Status BootInto(SandboxVmImpl& vm, const config::Config& config, const BootPlan& plan, const SandboxVmSpec& spec,
                Clock::time_point start) {
  BootTimings& t = vm.mutable_timings();
  RETURN_IF_ERROR(PrepareHostEnds(vm, config));
  t.prepare_ms = MsSince(start);
  auto vmm_start = Clock::now();
  RETURN_IF_ERROR(LaunchVmm(vm, config, plan, spec, vm.virtiofsd()->socket_path()));
  t.vmm_start_ms = MsSince(vmm_start);
  auto guest_start = Clock::now();
  RETURN_IF_ERROR(WaitForAgent(vm, config, start, spec.cancel_fd));
  t.agent_ready_ms = MsSince(guest_start);
  t.total_ms = MsSince(start);
  return Status::Ok();
}

}  // namespace

std::string SandboxVm::StateDirFor(const config::Config& config, std::string_view id) {
  return hypervisor::DefaultVmStateDir(config.runtime.state_dir, id);
}

Result<std::unique_ptr<SandboxVm>> SandboxVm::Boot(const config::Config& config, const SandboxVmSpec& spec) {
  auto start = Clock::now();
  std::string what = fmt::format("boot VM '{}'", spec.id);
  auto plan = Plan(config, spec);
  if (!plan.ok()) return plan.status().WithContext(what);
  RETURN_IF_ERROR_CTX(CreateVmDir(plan->state_dir), what);
  kLog.Info("booting VM {} ({} vCPU, {} MiB, kernel {}) in {}", plan->id, plan->vcpus, plan->memory_mib,
            config.guest.kernel, plan->state_dir);
  auto vm = std::make_unique<SandboxVmImpl>(plan->id, plan->state_dir);
  Status st = BootInto(*vm, config, *plan, spec, start);
  if (!st.ok()) {
    kLog.Warn("{} failed; tearing down what was started", what);
    Status cleanup = vm->Stop(milliseconds(0));
    if (!cleanup.ok()) kLog.Error("{}: clean-up after the failure: {}", what, cleanup.ToString());
    return std::move(st).WithContext(what);
  }
  const BootTimings& t = vm->timings();
  kLog.Info("VM {} booted in {:.0f} ms (prepare {:.0f}, VMM start {:.0f}, kernel+agent {:.0f})", plan->id, t.total_ms,
            t.prepare_ms, t.vmm_start_ms, t.agent_ready_ms);
  return std::unique_ptr<SandboxVm>(std::move(vm));
}

}  // namespace capsule::vm
