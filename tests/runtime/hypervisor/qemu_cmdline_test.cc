#include "runtime/hypervisor/qemu_cmdline.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/hypervisor/qemu_devices.h"
#include "tests/support/status_matchers.h"

namespace capsule::hypervisor {
namespace {

using nlohmann::json;
using Args = std::vector<std::string>;

VmSpec BaseSpec() {
  VmSpec s;
  s.id = "pod1";
  s.state_dir = "/run/capsule/vm/pod1";
  s.vcpus = 2;
  s.memory_mib = 512;
  s.kernel = "/usr/share/capsule/vmlinuz";
  s.initrd = "/usr/share/capsule/capsule-initrd.img";
  s.kernel_cmdline = "console=ttyS0 quiet panic=-1";
  s.console_log = "/run/capsule/vm/pod1/console.log";
  s.hotplug_slots = 2;
  return s;
}

QemuCommandInput Input(const config::HypervisorConfig& hv, VmSpec s, Accelerator accel, bool sandbox, int qmp) {
  QemuCommandInput in;
  in.hypervisor = &hv;
  in.spec = std::move(s);
  in.accelerator = accel;
  in.sandbox = sandbox;
  in.qmp_listen_fd = qmp;
  return in;
}

// As the launcher runs it: QEMU opens no path of the state dir; the
// console, the vhost-user sockets and the tap come as inherited fds.
// The console fd's description is its log's path (so `ps` shows a VM's
// QEMU by its state dir); a comma in it is doubled, as QEMU's option
// parser wants, instead of starting a new option.
TEST(QemuCmdlineTest, TheConsoleFdNamesItsLogWithCommasEscaped) {
  config::HypervisorConfig hv;
  VmSpec s = BaseSpec();
  s.console_log = "/run/a,b/console.log";
  QemuCommandInput in = Input(hv, s, Accelerator::kTcg, /*sandbox=*/false, /*qmp=*/3);
  in.console_fd = 4;
  auto args = BuildQemuCommandLine(in);
  auto it = std::find(args.begin(), args.end(), "-add-fd");
  ASSERT_NE(it, args.end());
  ASSERT_NE(it + 1, args.end());
  EXPECT_EQ(*(it + 1), "fd=4,set=1,opaque=/run/a,,b/console.log");
}

// The agent token goes to the guest as a fw_cfg file QEMU reads from an
// inherited fd: only its name and the fd's number are on the command line.
TEST(QemuCmdlineTest, TheAgentTokenIsAFwCfgFileReadThroughAnInheritedFd) {
  config::HypervisorConfig hv;
  VmSpec s = BaseSpec();
  s.agent_token = std::string(64, 'e');
  QemuCommandInput in = Input(hv, s, Accelerator::kTcg, /*sandbox=*/false, /*qmp=*/3);
  in.agent_token_fd = 7;
  auto args = BuildQemuCommandLine(in);
  auto it = std::find(args.begin(), args.end(), "-fw_cfg");
  ASSERT_NE(it, args.end());
  ASSERT_NE(it + 1, args.end());
  EXPECT_EQ(*(it + 1), "name=opt/io.capsule/agent-token,file=/proc/self/fd/7");
  for (const auto& a : args) EXPECT_EQ(a.find(s.agent_token), std::string::npos) << a;
  in.agent_token_fd = -1;
  args = BuildQemuCommandLine(in);
  EXPECT_EQ(std::find(args.begin(), args.end(), "-fw_cfg"), args.end());
}

TEST(QemuCmdlineTest, TcgVmExactArguments) {
  config::HypervisorConfig hv;
  hv.kernel_params = "capsule.debug=1";
  VmSpec s = BaseSpec();
  s.devices = {FsShare{"fs0", "/run/capsule/vm/pod1/virtiofsd.sock", "capsule-shared", 1024},
               VsockDevice{"vsock0", VsockDevice::Backend::kVhostUser, 0, "/run/capsule/vm/pod1/vsock.sock"}};
  s.devices.push_back(NetDevice{"netboot", "tap_cap_b01", "02:00:00:00:00:01", ""});
  QemuCommandInput in = Input(hv, s, Accelerator::kTcg, /*sandbox=*/true, /*qmp=*/3);
  in.console_fd = 4;
  in.device_fds = {{"fs0", 5}, {"vsock0", 6}, {"netboot", 9}};
  Args want = {
      "/usr/bin/qemu-system-x86_64",
      "-name", "guest=pod1,debug-threads=on",
      "-msg", "timestamp=on",
      "-no-user-config", "-nodefaults", "-display", "none", "-no-reboot", "-S",
      "-machine", "q35,memory-backend=mem,vmport=off,sata=off,smbus=off",
      "-accel", "tcg,tb-size=64", "-cpu", "max",
      "-smp", "2", "-m", "512M",
      "-object", "memory-backend-memfd,id=mem,size=512M,share=on",
      "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-chardev", "socket,id=qmp,fd=3,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
      "-add-fd", "fd=4,set=1,opaque=/run/capsule/vm/pod1/console.log",
      "-chardev", "file,id=console,path=/dev/fdset/1,append=on", "-serial", "chardev:console",
      "-global", "ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off",
      "-device", "pcie-root-port,id=rp0,bus=pcie.0,chassis=1",
      "-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=2",
      "-kernel", "/usr/share/capsule/vmlinuz",
      "-initrd", "/usr/share/capsule/capsule-initrd.img",
      "-append", "console=ttyS0 quiet panic=-1 capsule.debug=1",
      "-chardev", "socket,id=fs0-be,fd=5",
      "-device", "vhost-user-fs-pci,chardev=fs0-be,tag=capsule-shared,queue-size=1024,id=fs0",
      "-chardev", "socket,id=vsock0-be,fd=6",
      "-device", "vhost-user-vsock-pci,chardev=vsock0-be,id=vsock0",
      "-netdev", "tap,id=netboot-be,fd=9,vhost=off",
      "-device", "virtio-net-pci,netdev=netboot-be,mac=02:00:00:00:00:01,id=netboot",
  };
  EXPECT_EQ(BuildQemuCommandLine(in), want);
}

// A template keeps its RAM in a file it maps shared; a clone maps an
// inherited memfd (its own copy) and waits for the device state; both
// carry a VM generation id device.
TEST(QemuCmdlineTest, TemplateAndCloneRamBackingsIncomingAndVmgenid) {
  config::HypervisorConfig hv;
  VmSpec tpl = BaseSpec();
  tpl.memory_file = "/run/capsule/templates/k/ram";
  tpl.vmgenid = true;
  Args a = BuildQemuCommandLine(Input(hv, tpl, Accelerator::kTcg, false, 3));
  auto has = [&](const Args& args, const std::string& flag, const std::string& value) {
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == flag && args[i + 1] == value) return true;
    return false;
  };
  EXPECT_TRUE(has(a, "-object", "memory-backend-file,id=mem,size=512M,mem-path=/run/capsule/templates/k/ram,share=on"));
  EXPECT_TRUE(has(a, "-device", "vmgenid,id=vmgenid0,guid=auto"));
  EXPECT_EQ(std::count(a.begin(), a.end(), "-incoming"), 0);

  VmSpec clone = BaseSpec();
  clone.memory_fd = 7;
  clone.incoming = true;
  clone.vmgenid = true;
  Args b = BuildQemuCommandLine(Input(hv, clone, Accelerator::kTcg, false, 3));
  EXPECT_TRUE(has(b, "-object", "memory-backend-file,id=mem,size=512M,mem-path=/proc/self/fd/7,share=on"));
  EXPECT_TRUE(has(b, "-incoming", "defer"));
  EXPECT_TRUE(has(b, "-device", "vmgenid,id=vmgenid0,guid=auto"));

  VmSpec cow = tpl;
  cow.memory_private = true;
  Args c = BuildQemuCommandLine(Input(hv, cow, Accelerator::kTcg, false, 3));
  EXPECT_TRUE(has(c, "-object", "memory-backend-file,id=mem,size=512M,mem-path=/run/capsule/templates/k/ram,share=off"));
}

// Disks hot-plug onto a virtio-scsi controller the VM has from boot (so a
// template carries it to its clones); without scsi_controller there is none.
TEST(QemuCmdlineTest, TheScsiControllerIsThereFromBootOnlyWhenAsked) {
  config::HypervisorConfig hv;
  VmSpec s = BaseSpec();
  Args without = BuildQemuCommandLine(Input(hv, s, Accelerator::kTcg, false, 3));
  EXPECT_EQ(std::count(without.begin(), without.end(), "virtio-scsi-pci,id=scsi0"), 0);
  s.scsi_controller = true;
  Args with = BuildQemuCommandLine(Input(hv, s, Accelerator::kTcg, false, 3));
  auto it = std::find(with.begin(), with.end(), "virtio-scsi-pci,id=scsi0");
  ASSERT_NE(it, with.end());
  EXPECT_EQ(*(it - 1), "-device");
}

TEST(QemuCmdlineTest, KvmVmExactArguments) {
  config::HypervisorConfig hv;
  hv.path = "/opt/qemu/bin/qemu-system-x86_64";
  VmSpec s = BaseSpec();
  s.vcpus = 1;
  s.memory_mib = 256;
  s.hotplug_slots = 0;
  s.initrd.clear();
  s.extra_kernel_params = "capsule.pod=x";
  s.devices = {VsockDevice{"vsock0", VsockDevice::Backend::kVhostKernel, 42, "", 11},
               NetDevice{"eth0", "tap0", "52:54:00:12:34:56", ""}};
  s.extra_args = {"-device", "virtio-rng-pci"};
  // Without fds (a launcher that cannot make QEMU's netns): paths and names;
  // the kernel vsock's vhost fd that holds its CID.
  QemuCommandInput in = Input(hv, s, Accelerator::kKvm, /*sandbox=*/false, /*qmp=*/7);
  in.device_fds = {{"vsock0", 11}};
  Args want = {
      "/opt/qemu/bin/qemu-system-x86_64",
      "-name", "guest=pod1,debug-threads=on",
      "-msg", "timestamp=on",
      "-no-user-config", "-nodefaults", "-display", "none", "-no-reboot", "-S",
      "-machine", "q35,memory-backend=mem,vmport=off,sata=off,smbus=off",
      "-accel", "kvm", "-cpu", "host",
      "-smp", "1", "-m", "256M",
      "-object", "memory-backend-memfd,id=mem,size=256M,share=on",
      "-chardev", "socket,id=qmp,fd=7,server=on,wait=off", "-mon", "chardev=qmp,mode=control",
      "-chardev", "file,id=console,path=/run/capsule/vm/pod1/console.log,append=on", "-serial", "chardev:console",
      "-kernel", "/usr/share/capsule/vmlinuz",
      "-append", "console=ttyS0 quiet panic=-1 capsule.pod=x",
      "-device", "vhost-vsock-pci,guest-cid=42,vhostfd=11,id=vsock0",
      "-netdev", "tap,id=eth0-be,ifname=tap0,script=no,downscript=no,vhost=off",
      "-device", "virtio-net-pci,netdev=eth0-be,mac=52:54:00:12:34:56,id=eth0",
      "-device", "virtio-rng-pci",
  };
  EXPECT_EQ(BuildQemuCommandLine(in), want);
}

TEST(QemuCmdlineTest, NoKernelBootsNothingAndTbSizeZeroKeepsQemuDefault) {
  config::HypervisorConfig hv;
  hv.tcg_tb_size_mib = 0;
  VmSpec s = BaseSpec();
  s.kernel.clear();
  s.initrd.clear();
  s.kernel_cmdline.clear();
  Args a = BuildQemuCommandLine(Input(hv, s, Accelerator::kTcg, false, 3));
  for (const char* flag : {"-kernel", "-initrd", "-append", "-sandbox"})
    EXPECT_EQ(std::find(a.begin(), a.end(), flag), a.end()) << flag;
  auto accel = std::find(a.begin(), a.end(), "-accel");
  ASSERT_NE(accel, a.end());
  EXPECT_EQ(*(accel + 1), "tcg");
}

TEST(QemuCmdlineTest, KernelCmdlineJoinsPartsTrimmingBlanks) {
  config::HypervisorConfig hv;
  VmSpec s;
  s.kernel_cmdline = "  console=ttyS0  ";
  hv.kernel_params = "   ";
  s.extra_kernel_params = "a=b ";
  EXPECT_EQ(ComposeKernelCmdline(s, hv), "console=ttyS0 a=b");
  s.kernel_cmdline.clear();
  s.extra_kernel_params.clear();
  EXPECT_EQ(ComposeKernelCmdline(s, hv), "");
}

TEST(QemuDevicesTest, HotplugStepsForATapNic) {
  Device nic = NetDevice{"eth0", "tap0", "52:54:00:00:00:01", ""};
  auto add = BackendAddSteps(nic);
  ASSERT_EQ(add.size(), 1u);
  EXPECT_EQ(add[0], (QmpStep{"netdev_add", json{{"type", "tap"}, {"id", "eth0-be"}, {"ifname", "tap0"},
                                                {"script", "no"}, {"downscript", "no"}, {"vhost", false}}}));
  EXPECT_EQ(DeviceAddStep(nic, "rp1"),
            (QmpStep{"device_add", json{{"driver", "virtio-net-pci"}, {"netdev", "eth0-be"},
                                        {"mac", "52:54:00:00:00:01"}, {"id", "eth0"}, {"bus", "rp1"}}}));
  EXPECT_EQ(BackendRemoveSteps(nic), (std::vector<QmpStep>{{"netdev_del", json{{"id", "eth0-be"}}}}));
}

TEST(QemuDevicesTest, HotplugStepsForATapPassedAsAnFd) {
  Device nic = NetDevice{"eth0", "tap_cap0", "52:54:00:00:00:01", "tapfd0"};
  auto add = BackendAddSteps(nic);
  ASSERT_EQ(add.size(), 1u);
  // No ifname: QEMU (host netns) could not find a tap of the pod's netns by name.
  EXPECT_EQ(add[0], (QmpStep{"netdev_add", json{{"type", "tap"}, {"id", "eth0-be"}, {"fd", "tapfd0"}, {"vhost", false}}}));
  EXPECT_EQ(DeviceAddStep(nic, "rp0").arguments["mac"], "52:54:00:00:00:01");
  EXPECT_EQ(PassedFdReleaseSteps(nic), (std::vector<QmpStep>{{"closefd", json{{"fdname", "tapfd0"}}}}));
  EXPECT_TRUE(PassedFdReleaseSteps(NetDevice{"eth1", "tap0", "52:54:00:00:00:02", ""}).empty());
  EXPECT_EQ(BackendRemoveSteps(nic), (std::vector<QmpStep>{{"netdev_del", json{{"id", "eth0-be"}}}}));
  EXPECT_EQ(DeviceBootArgs(nic), (std::vector<std::string>{
                                     "-netdev", "tap,id=eth0-be,fd=tapfd0,vhost=off", "-device",
                                     "virtio-net-pci,netdev=eth0-be,mac=52:54:00:00:00:01,id=eth0"}));
}

// The serial vsock: its own virtio-serial controller, then the named port on
// it whose chardev is the socket the launcher connected (an fd, as for
// vhost-user); QEMU emulates it, so private RAM is fine, but it only exists
// from boot.
TEST(QemuDevicesTest, TheSerialVsockIsAControllerAndANamedPortOnAPassedSocket) {
  Device serial = VsockDevice{"vsock0", VsockDevice::Backend::kSerial, 3, "/run/s.sock"};
  EXPECT_FALSE(IsVhostUser(serial));
  EXPECT_TRUE(ConnectsSocket(serial));
  EXPECT_EQ(DeviceBootArgs(serial, 9),
            (std::vector<std::string>{"-chardev", "socket,id=vsock0-be,fd=9", "-device", "virtio-serial-pci,id=vsock0-bus",
                                      "-device",
                                      "virtserialport,bus=vsock0-bus.0,chardev=vsock0-be,name=capsule.vsock,id=vsock0"}));
  EXPECT_OK(ValidateDevice(serial));
  EXPECT_FALSE(ValidateDevice(VsockDevice{"vsock0", VsockDevice::Backend::kSerial, 3, "relative.sock"}).ok());
}

// A disk's image goes over as an fd into an fdset (add-fd), the blockdev
// opens /dev/fdset/N (read-only unless writable), the disk is a SCSI disk on
// the controller's bus, the set is released once the blockdev holds its dup,
// and unplugging deletes the blockdev.
TEST(QemuDevicesTest, ABlockDeviceReadsItsImageFromAPassedFdset) {
  Device disk = BlockDevice{"rootfs1", "/var/lib/capsule/erofs/x.erofs", "c1-rootfs", false, 7};
  EXPECT_FALSE(ConnectsSocket(disk));
  auto add = BackendAddSteps(disk, 4);
  ASSERT_EQ(add.size(), 1u);
  EXPECT_EQ(add[0].command, "blockdev-add");
  EXPECT_EQ(add[0].arguments, (json{{"driver", "file"}, {"node-name", "rootfs1-be"}, {"filename", "/dev/fdset/4"},
                                    {"read-only", true}}));
  QmpStep dev = DeviceAddStep(disk, kScsiBusId);
  EXPECT_EQ(dev.arguments, (json{{"driver", "scsi-hd"}, {"drive", "rootfs1-be"}, {"serial", "c1-rootfs"},
                                 {"id", "rootfs1"}, {"bus", "scsi0.0"}}));
  EXPECT_EQ(PassedFdReleaseSteps(disk, 4), (std::vector<QmpStep>{{"remove-fd", json{{"fdset-id", 4}}}}));
  EXPECT_EQ(BackendRemoveSteps(disk), (std::vector<QmpStep>{{"blockdev-del", json{{"node-name", "rootfs1-be"}}}}));
  Device writable = BlockDevice{"scratch", "/x.img", "scratch", true, 7};
  EXPECT_EQ(BackendAddSteps(writable, 5)[0].arguments["read-only"], false);
  EXPECT_OK(ValidateDevice(disk));
  EXPECT_FALSE(ValidateDevice(BlockDevice{"d", "/x", "", false, 7}).ok()) << "a serial is how the guest finds it";
  EXPECT_FALSE(ValidateDevice(BlockDevice{"d", "/x", "twenty-one-chars-long", false, 7}).ok());
  EXPECT_FALSE(ValidateDevice(BlockDevice{"d", "/x", "a,b", false, 7}).ok());
}

// A hot-plugged vhost-user device's chardev takes the socket the launcher
// connected and passed (getfd); a kernel vsock device its vhost fd.
TEST(QemuDevicesTest, HotplugStepsForVhostUserAndKernelVsock) {
  Device user = VsockDevice{"vsock0", VsockDevice::Backend::kVhostUser, 0, "/run/v.sock"};
  EXPECT_TRUE(IsVhostUser(user));
  auto add = BackendAddSteps(user);
  ASSERT_EQ(add.size(), 1u);
  EXPECT_EQ(add[0].command, "chardev-add");
  EXPECT_EQ(add[0].arguments["backend"]["data"]["addr"], (json{{"type", "fd"}, {"data", {{"str", "vsock0-fd"}}}}));
  EXPECT_EQ(add[0].arguments["backend"]["data"]["server"], false);
  EXPECT_EQ(DeviceAddStep(user, "rp0").arguments["driver"], "vhost-user-vsock-pci");
  EXPECT_EQ(PassedFdReleaseSteps(user), (std::vector<QmpStep>{{"closefd", json{{"fdname", "vsock0-fd"}}}}));
  EXPECT_EQ(BackendRemoveSteps(user), (std::vector<QmpStep>{{"chardev-remove", json{{"id", "vsock0-be"}}}}));
  EXPECT_TRUE(IsVhostUser(FsShare{"fs0", "/run/fs.sock", "t", 1024}));

  Device kernel = VsockDevice{"vsock1", VsockDevice::Backend::kVhostKernel, 5, ""};
  EXPECT_FALSE(IsVhostUser(kernel));
  EXPECT_TRUE(BackendAddSteps(kernel).empty());
  EXPECT_EQ(DeviceAddStep(kernel, "rp0").arguments["guest-cid"], 5);
  EXPECT_FALSE(DeviceAddStep(kernel, "rp0").arguments.contains("vhostfd")) << "QEMU opens the device itself";
  EXPECT_TRUE(BackendRemoveSteps(kernel).empty());
  Device held = VsockDevice{"vsock1", VsockDevice::Backend::kVhostKernel, 5, "", 12};
  EXPECT_EQ(DeviceAddStep(held, "rp0").arguments["vhostfd"], "vsock1-fd");
  EXPECT_EQ(PassedFdReleaseSteps(held), (std::vector<QmpStep>{{"closefd", json{{"fdname", "vsock1-fd"}}}}));
}

}  // namespace
}  // namespace capsule::hypervisor
