// SandboxVm::Restore, a clone of a template (vm_template.h):
//   1. plan as for a boot; the size must be the template's
//   2. state dir, vsock host end with a random guest CID (vhost-user; the
//      kernel back end picks a free one), virtiofsd (virtio-fs device set)
//   3. virtio-fs device set: the template's RAM copied into a memfd of the
//      clone's own (ram_image.h: shared, because vhost-user back ends map
//      guest RAM); dense: the template's sealed RAM mapped private
//   4. QEMU launched as the template was (same machine, size, root ports,
//      vmgenid, boot NIC MAC) but `-incoming defer`, RAM from that memfd;
//      the device state loaded (x-ignore-shared: RAM is already there)
//   5. vsock (unless it is a serial one, which came with the state) and
//      virtio-fs (not in the dense set) hot-plugged into reserved root ports while the guest is
//      still paused; resume. vmgenid: QEMU drew a new id at start
//      and writes it into the guest after the load, so the guest kernel
//      reseeds its RNG at resume, before anything else can use it
//   6. the agent checked over vsock (its listener was made before the
//      template had a vsock device and accepts once the device arrives)
// Any failure stops what was started (SandboxVmImpl::Stop): no process,
// memfd, socket or dir is left, and the caller may boot instead.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>

#include "runtime/common/logging.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/vm/boot_steps.h"
#include "runtime/vm/ram_image.h"
#include "runtime/vm/vm_dir.h"
#include "runtime/vm/vm_template.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
const log::Logger kRestoreLog("vm");

// A device-state stream of a few hundred KB; seconds would mean trouble.
constexpr milliseconds kStateLoadTimeout{30000};
// CIDs 0..2 are reserved (linux/vm_sockets.h), 2^32-1 is VMADDR_CID_ANY.
constexpr uint64_t kFirstCid = 3;
constexpr uint64_t kCidCount = 0xfffffffeull - kFirstCid + 1;

// vhost-user: each clone's CID is its own (random, so no two clones of a
// template share it); the kernel back end allocates a free one itself, and
// a serial link has one CID for every VM.
uint64_t CloneCid(const config::Config& config) {
  if (config.vsock.backend == config::VsockBackendKind::kVhost || VsockIsPartOfTheTemplate(config)) return 0;
  uint32_t r = 0;
  if (::getrandom(&r, sizeof r, 0) != sizeof r) return 0;
  return kFirstCid + r % kCidCount;
}

Status LaunchClone(SandboxVmImpl& vm, const config::Config& config, const BootPlan& plan, const VmTemplate& tpl,
                   BootTimings& t) {
  auto step = BootClock::now();
  ASSIGN_OR_RETURN(hypervisor::VmSpec s, BaseVmmSpec(config, plan, SandboxVmSpec{plan.id, plan.vcpus, plan.memory_mib, ""}));
  RamCopy ram;
  if (IsDense(config)) {
    s.memory_fd = tpl.sealed_ram->get();
    s.memory_private = true;
  } else {
    ASSIGN_OR_RETURN(ram, CopyRamImage(tpl.ram_path(), static_cast<uint64_t>(tpl.memory_mib) << 20,
                                       "capsule-ram-" + plan.id));
    s.memory_fd = ram.memfd.get();
  }
  t.ram_copy_ms = MsSince(step);
  s.incoming = true;
  s.vmgenid = true;
  s.hotplug_slots = tpl.hotplug_slots;
  if (!tpl.boot_nic_mac.empty()) {
    // Migrated state carries the MAC anyway; the tap is the clone's own.
    ASSIGN_OR_RETURN(hypervisor::NetDevice nic, BootNicDevice());
    nic.mac = tpl.boot_nic_mac;
    s.devices.push_back(std::move(nic));
  }
  // A serial vsock comes with the state; its chardev is this clone's daemon.
  if (VsockIsPartOfTheTemplate(config)) s.devices.push_back(VsockDeviceFor(*vm.vsock()));
  step = BootClock::now();
  ASSIGN_OR_RETURN(hypervisor::VmmPtr vmm, hypervisor::NewQemuHypervisor(config)->Launch(s));
  vm.SetVmm(std::move(vmm));
  t.vmm_start_ms = MsSince(step);  // QEMU holds the RAM now; our memfd closes here
  if (IsDense(config))
    kRestoreLog.Info("VM {}: template {} RAM mapped copy-on-write; QEMU pid {} waits for the state", plan.id, tpl.key,
                     vm.vmm_pid());
  else
    kRestoreLog.Info("VM {}: {} MiB of template {} RAM copied in {:.0f} ms; QEMU pid {} waits for the state", plan.id,
                     ram.copied >> 20, tpl.key, t.ram_copy_ms, vm.vmm_pid());
  return Status::Ok();
}

Status LoadAndPlug(SandboxVmImpl& vm, const config::Config& config, const VmTemplate& tpl, BootTimings& t) {
  auto step = BootClock::now();
  UniqueFd state(::open(tpl.state_path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!state) return ErrnoStatus("open template state " + tpl.state_path());
  RETURN_IF_ERROR(vm.vmm().LoadState(state.get(), kStateLoadTimeout));
  t.state_load_ms = MsSince(step);
  step = BootClock::now();
  vsock::VmVsock& v = *vm.vsock();
  if (!VsockIsPartOfTheTemplate(config)) RETURN_IF_ERROR(vm.vmm().HotplugDevice(VsockDeviceFor(v)));
  v.OnQemuStarted();  // QEMU holds its own copy of a kernel vhost fd now
  if (!IsDense(config)) RETURN_IF_ERROR(vm.vmm().HotplugDevice(FsDeviceFor(vm)));
  t.hotplug_ms = MsSince(step);
  return vm.vmm().Resume();
}

Status RestoreInto(SandboxVmImpl& vm, const config::Config& config, const BootPlan& plan, const VmTemplate& tpl,
                   int cancel_fd, const std::string& cgroup, BootClock::time_point start) {
  BootTimings& t = vm.mutable_timings();
  t.restored = true;
  RETURN_IF_ERROR(PrepareHostEnds(vm, config, CloneCid(config)));
  t.prepare_ms = MsSince(start);
  RETURN_IF_ERROR(LaunchClone(vm, config, plan, tpl, t));
  RETURN_IF_ERROR(JoinSpecCgroup(vm, cgroup));
  RETURN_IF_ERROR(LoadAndPlug(vm, config, tpl, t));
  auto guest = BootClock::now();
  RETURN_IF_ERROR(WaitForAgent(vm, config, start, cancel_fd));
  t.agent_ready_ms = MsSince(guest);
  t.total_ms = MsSince(start);
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<SandboxVm>> SandboxVm::Restore(const config::Config& config, const SandboxVmSpec& spec,
                                                      const VmTemplate& tpl) {
  auto start = BootClock::now();
  std::string what = fmt::format("restore VM '{}' from template {}", spec.id, tpl.key);
  auto plan = Plan(config, spec);
  if (!plan.ok()) return plan.status().WithContext(what);
  if (IsDense(config) && !tpl.sealed_ram)
    return FailedPrecondition(fmt::format("{}: the template has no sealed RAM for copy-on-write clones", what));
  if (plan->vcpus != tpl.vcpus || plan->memory_mib != tpl.memory_mib)
    return FailedPrecondition(fmt::format("{}: the template is {} vCPU, {} MiB, the VM {} vCPU, {} MiB", what,
                                          tpl.vcpus, tpl.memory_mib, plan->vcpus, plan->memory_mib));
  RETURN_IF_ERROR_CTX(CreateVmDir(plan->state_dir), what);
  auto vm = std::make_unique<SandboxVmImpl>(plan->id, plan->state_dir);
  Status st = RestoreInto(*vm, config, *plan, tpl, spec.cancel_fd, spec.cgroup, start);
  if (!st.ok()) {
    kRestoreLog.Warn("{} failed; tearing down what was started", what);
    Status cleanup = vm->Stop(milliseconds(0));
    if (!cleanup.ok()) kRestoreLog.Error("{}: clean-up after the failure: {}", what, cleanup.ToString());
    return std::move(st).WithContext(what);
  }
  const BootTimings& t = vm->timings();
  kRestoreLog.Info(
      "VM {} restored in {:.0f} ms (prepare {:.0f}, RAM copy {:.0f}, VMM start {:.0f}, state {:.0f}, "
      "hot-plug {:.0f}, agent {:.0f})",
      plan->id, t.total_ms, t.prepare_ms, t.ram_copy_ms, t.vmm_start_ms, t.state_load_ms, t.hotplug_ms,
      t.agent_ready_ms);
  return std::unique_ptr<SandboxVm>(std::move(vm));
}

}  // namespace capsule::vm
