// Why each argument is there:
//  -S                 start paused; the driver resumes after connecting QMP,
//                     so no early event (a guest that dies at once) is missed
//  -no-user-config -nodefaults -display none
//                     no config files, no default NIC/VGA/serial/monitor
//  -no-reboot         a guest reset (panic=-1, reboot) ends the VM: a pod VM
//                     is never rebooted behind the runtime's back
//  q35                microvm hangs under TCG with Debian's kernel (HOST-NOTES);
//                     vmport/sata/smbus off: fewer devices to probe and attack
//  memory-backend-memfd,share=on
//                     vhost-user back ends (virtiofsd, vsock) map guest RAM;
//                     the machine's memory-backend property avoids a NUMA node
//  memory-backend-file,share=on
//                     a template's RAM in a named file, or a clone's own copy
//                     of it (an inherited memfd, by /proc/self/fd). Shared,
//                     so vhost-user works and x-ignore-shared can leave RAM
//                     out of the state. (QEMU 7.2 drops RAM of a *memfd*
//                     backend under x-ignore-shared: POOL-NOTES.md.)
//  -incoming defer    a clone waits for migrate-incoming (Vmm::LoadState)
//  pcie-root-port xN  q35's pcie.0 cannot hot-plug; each port is one free slot
//  acpi-pci-hotplug-with-bridge-support=off
//                     native PCIe hot-plug: an unplug of a device the guest
//                     never saw (paused/prelaunch VM) completes at once
//  QMP on an inherited listening fd
//                     the socket exists before QEMU starts, so readiness is
//                     simply the greeting; no polling for the file
//  fds for the console, taps, vhost-user sockets, vhost and RAM files
//                     QEMU may run as a user that cannot open paths of the
//                     VM's state dir (vmm_user.h); the launcher opens them
//  no -pidfile        the launcher knows the pid and writes qemu.pid
#include "runtime/hypervisor/qemu_cmdline.h"

#include <fmt/format.h>

#include "runtime/hypervisor/qemu_devices.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::hypervisor {
namespace {

void Add(std::vector<std::string>& a, std::initializer_list<std::string> items) { a.insert(a.end(), items); }

void AddAccelerator(std::vector<std::string>& a, const QemuCommandInput& in) {
  if (in.accelerator == Accelerator::kKvm) {
    Add(a, {"-accel", "kvm", "-cpu", "host"});
    return;
  }
  uint32_t tb = in.hypervisor->tcg_tb_size_mib;
  Add(a, {"-accel", tb > 0 ? fmt::format("tcg,tb-size={}", tb) : "tcg", "-cpu", "max"});
}

std::string FdOrPath(int fd, const std::string& path) {
  return fd >= 0 ? fmt::format("/proc/self/fd/{}", fd) : path;
}

void AddBoot(std::vector<std::string>& a, const QemuCommandInput& in) {
  const VmSpec& s = in.spec;
  if (s.kernel.empty()) return;
  Add(a, {"-kernel", FdOrPath(in.kernel_fd, s.kernel)});
  if (!s.initrd.empty()) Add(a, {"-initrd", FdOrPath(in.initrd_fd, s.initrd)});
  std::string cmdline = ComposeKernelCmdline(s, *in.hypervisor);
  if (!cmdline.empty()) Add(a, {"-append", cmdline});
}

std::string MemoryBackend(const QemuCommandInput& in) {
  const VmSpec& s = in.spec;
  const int fd = s.memory_fd >= 0 ? s.memory_fd : in.memory_file_fd;
  std::string path = fd >= 0 ? fmt::format("/proc/self/fd/{}", fd) : s.memory_file;
  if (path.empty()) return fmt::format("memory-backend-memfd,id=mem,size={}M,share=on", s.memory_mib);
  return fmt::format("memory-backend-file,id=mem,size={}M,mem-path={},share={}", s.memory_mib, path,
                     s.memory_private ? "off" : "on");
}

// A value inside a QEMU -opt list: commas are doubled.
std::string QemuOptValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    out += c;
    if (c == ',') out += ',';
  }
  return out;
}

}  // namespace

std::string HotplugPortId(uint32_t index) { return fmt::format("rp{}", index); }

std::string ComposeKernelCmdline(const VmSpec& spec, const config::HypervisorConfig& hv) {
  std::string out;
  for (const std::string* part : {&spec.kernel_cmdline, &hv.kernel_params, &spec.extra_kernel_params}) {
    size_t b = part->find_first_not_of(' ');
    if (b == std::string::npos) continue;
    size_t e = part->find_last_not_of(' ');
    if (!out.empty()) out += ' ';
    out += part->substr(b, e - b + 1);
  }
  return out;
}

std::vector<std::string> BuildQemuCommandLine(const QemuCommandInput& in) {
  const VmSpec& s = in.spec;
  std::vector<std::string> a = {in.hypervisor->path};
  Add(a, {"-name", fmt::format("guest={},debug-threads=on", s.id), "-msg", "timestamp=on", "-no-user-config",
          "-nodefaults", "-display", "none", "-no-reboot", "-S"});
  Add(a, {"-machine", "q35,memory-backend=mem,vmport=off,sata=off,smbus=off"});
  if (!in.hypervisor->firmware.empty()) Add(a, {"-bios", FdOrPath(in.firmware_fd, in.hypervisor->firmware)});
  AddAccelerator(a, in);
  Add(a, {"-smp", std::to_string(s.vcpus), "-m", fmt::format("{}M", s.memory_mib), "-object", MemoryBackend(in)});
  if (in.sandbox) Add(a, {"-sandbox", kQemuSandboxPolicy});
  Add(a, {"-chardev", fmt::format("socket,id=qmp,fd={},server=on,wait=off", in.qmp_listen_fd), "-mon",
          "chardev=qmp,mode=control"});
  if (in.console_fd >= 0) {
    // The fd's description names the log it is, and with it the VM's state
    // dir: QEMU opens no path there any more, and operators (and leak
    // checks) find a VM's QEMU by its dir in `ps`.
    Add(a, {"-add-fd", fmt::format("fd={},set={},opaque={}", in.console_fd, kConsoleFdset, QemuOptValue(s.console_log))});
    Add(a, {"-chardev", fmt::format("file,id=console,path=/dev/fdset/{},append=on", kConsoleFdset)});
  } else {
    Add(a, {"-chardev", fmt::format("file,id=console,path={},append=on", s.console_log)});
  }
  Add(a, {"-serial", "chardev:console"});
  if (s.hotplug_slots > 0) Add(a, {"-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off"});
  for (uint32_t i = 0; i < s.hotplug_slots; ++i)
    Add(a, {"-device", fmt::format("pcie-root-port,id={},bus=pcie.0,chassis={}", HotplugPortId(i), i + 1)});
  if (s.scsi_controller) Add(a, {"-device", fmt::format("virtio-scsi-pci,id={}", kScsiControllerId)});
  if (s.vmgenid) Add(a, {"-device", "vmgenid,id=vmgenid0,guid=auto"});
  if (in.agent_token_fd >= 0)
    Add(a, {"-fw_cfg", fmt::format("name={},file=/proc/self/fd/{}", guest_abi::kAgentTokenFwCfgName, in.agent_token_fd)});
  AddBoot(a, in);
  if (s.incoming) Add(a, {"-incoming", "defer"});
  for (const Device& d : s.devices) {
    auto fd = in.device_fds.find(DeviceId(d));
    auto args = DeviceBootArgs(d, fd == in.device_fds.end() ? -1 : fd->second);
    a.insert(a.end(), args.begin(), args.end());
  }
  a.insert(a.end(), s.extra_args.begin(), s.extra_args.end());
  return a;
}

}  // namespace capsule::hypervisor
