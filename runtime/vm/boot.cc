// SandboxVm::Boot, a cold boot:
//   1. plan: id, size (spec or config defaults, within config max), kernel
//      and initrd present, socket paths fit -- before anything starts
//   2. state dir <runtime.state_dir>/vm/<id>/ (0700)
//   3. vsock host end (VsockBackend::Prepare: capsule-vsockd listening, or a
//      reserved CID), then virtiofsd with the shared-propagation share (not
//      in the dense device set)
//   4. the VMM (Hypervisor::Launch with the vsock and virtio-fs devices and,
//      with guest.boot_nic, a NIC on a tap in QEMU's own netns;
//      returns once QMP answers and the guest runs), VmVsock::OnQemuStarted
//   5. ConnectAgent over VmVsock::Dial(guest_abi::kAgentVsockPort) until
//      runtime.boot_timeout_ms from the start, aborted at once when the VMM's
//      exit fd fires or the spec's cancel fd does; the client's calls get
//      runtime.agent_timeout_ms
// Any failure stops what was started, in reverse order (SandboxVmImpl::Stop).
#include <fmt/format.h>

#include "runtime/common/logging.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/vm/boot_steps.h"
#include "runtime/vm/vm_dir.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
const log::Logger kBootLog("vm");

Status LaunchVmm(SandboxVmImpl& vm, const config::Config& config, const BootPlan& plan, const SandboxVmSpec& spec) {
  ASSIGN_OR_RETURN(hypervisor::VmSpec s, BaseVmmSpec(config, plan, spec));
  s.devices = {VsockDeviceFor(*vm.vsock())};
  if (!IsDense(config)) s.devices.push_back(FsDeviceFor(vm));
  if (config.guest.boot_nic) {
    ASSIGN_OR_RETURN(hypervisor::NetDevice nic, BootNicDevice());
    s.devices.push_back(std::move(nic));
  }
  ASSIGN_OR_RETURN(hypervisor::VmmPtr vmm, hypervisor::NewQemuHypervisor(config)->Launch(s));
  vm.vsock()->OnQemuStarted();  // QEMU holds its own copy of a kernel vhost fd now
  kBootLog.Info("VM {}: QEMU pid {} running ({}, {} vCPU, {} MiB)", plan.id, vmm->vmm_pid(),
                hypervisor::AcceleratorName(vmm->accelerator()), plan.vcpus, plan.memory_mib);
  vm.SetVmm(std::move(vmm));
  return Status::Ok();
}

Status BootInto(SandboxVmImpl& vm, const config::Config& config, const BootPlan& plan, const SandboxVmSpec& spec,
                BootClock::time_point start) {
  BootTimings& t = vm.mutable_timings();
  RETURN_IF_ERROR(PrepareHostEnds(vm, config));
  t.prepare_ms = MsSince(start);
  auto vmm_start = BootClock::now();
  RETURN_IF_ERROR(LaunchVmm(vm, config, plan, spec));
  RETURN_IF_ERROR(JoinSpecCgroup(vm, spec.cgroup));
  t.vmm_start_ms = MsSince(vmm_start);
  auto guest_start = BootClock::now();
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
  auto start = BootClock::now();
  std::string what = fmt::format("boot VM '{}'", spec.id);
  auto plan = Plan(config, spec);
  if (!plan.ok()) return plan.status().WithContext(what);
  RETURN_IF_ERROR_CTX(CreateVmDir(plan->state_dir), what);
  kBootLog.Info("booting VM {} ({} vCPU, {} MiB, kernel {}) in {}", plan->id, plan->vcpus, plan->memory_mib,
                config.guest.kernel, plan->state_dir);
  auto vm = std::make_unique<SandboxVmImpl>(plan->id, plan->state_dir);
  Status st = BootInto(*vm, config, *plan, spec, start);
  if (!st.ok()) {
    kBootLog.Warn("{} failed; tearing down what was started", what);
    Status cleanup = vm->Stop(milliseconds(0));
    if (!cleanup.ok()) kBootLog.Error("{}: clean-up after the failure: {}", what, cleanup.ToString());
    return std::move(st).WithContext(what);
  }
  const BootTimings& t = vm->timings();
  kBootLog.Info("VM {} booted in {:.0f} ms (prepare {:.0f}, VMM start {:.0f}, kernel+agent {:.0f})", plan->id,
                t.total_ms, t.prepare_ms, t.vmm_start_ms, t.agent_ready_ms);
  return std::unique_ptr<SandboxVm>(std::move(vm));
}

}  // namespace capsule::vm
