// What a VM is made of, independent of the VMM that runs it: size, boot
// payload, and devices described by intent (a tap NIC, a vsock, a virtio-fs
// share) rather than by VMM arguments, so Firecracker or Cloud Hypervisor
// can map the same spec. The QEMU mapping lives in qemu_devices.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/config/config.h"

namespace capsule::hypervisor {

// The accelerator a VM actually runs with (config's "auto" resolved).
enum class Accelerator { kKvm, kTcg };
std::string_view AcceleratorName(Accelerator a);

// A virtio-net NIC backed by a host tap interface. Without fd_name the VMM
// opens the tap by name (creating it if it does not exist) in the VMM's own
// network namespace (a private, empty one when launched by root). With
// fd_name it uses a tap fd handed over before with Vmm::PassFd: the way to
// reach a tap in a pod's netns, which the VMM cannot open by name. The VMM consumes the passed fd when
// the device is added, so each hot-plug needs its own PassFd. fd_name is
// for hot-plug only: ValidateVmSpec refuses it on boot-time devices.
struct NetDevice {
  std::string id;        // device id, unique in the VM ([A-Za-z][A-Za-z0-9_.-]*)
  std::string tap_name;  // host interface name (IFNAMSIZ-1 = 15 chars at most); informational with fd_name
  std::string mac;       // "52:54:00:12:34:56"
  std::string fd_name;   // "" or a name given to Vmm::PassFd ([A-Za-z][A-Za-z0-9_.-]{0,31})
  bool operator==(const NetDevice&) const = default;
};

// The guest's vsock. kVhostKernel: /dev/vhost-vsock with guest_cid.
// kVhostUser: a vhost-user-vsock back end at socket_path (it owns the CID).
// kSerial: a virtio-serial port named capsule.vsock whose chardev is the
// back end at socket_path (capsule-vsockd --serial-socket); QEMU emulates
// it, so it works with private RAM and migrates, but is not hot-pluggable.
struct VsockDevice {
  enum class Backend { kVhostKernel, kVhostUser, kSerial };
  std::string id;
  Backend backend = Backend::kVhostUser;
  uint32_t guest_cid = 0;
  std::string socket_path;
  // kVhostKernel: the /dev/vhost-vsock fd that holds guest_cid, handed to
  // the VMM (vhostfd) so the CID is never free between reservation and use.
  // The caller keeps it open until the launch or hot-plug returned. -1: the
  // VMM opens the device itself. Never recorded.
  int vhost_fd = -1;
  bool operator==(const VsockDevice&) const = default;
};

// A virtio-fs share served by a vhost-user-fs daemon (virtiofsd).
struct FsShare {
  std::string id;
  std::string socket_path;
  std::string tag;            // the guest mounts it with `mount -t virtiofs <tag>`
  uint32_t queue_size = 1024;  // virtqueue size; virtiofsd handles up to 1024
  bool operator==(const FsShare&) const = default;
};

// A disk on an image the caller opened (`fd`, kept open until the hot-plug
// returns; the VMM opens no path): the fd goes into an fdset (add-fd) that a
// blockdev on /dev/fdset/N opens. It is a SCSI disk (scsi-hd) on the VM's
// virtio-scsi controller (VmSpec::scsi_controller), not a PCI device of its
// own: the guest adds a LUN as soon as the controller's event says so, where
// a PCIe hot-plug waits out the spec's link delays (~150 ms per disk under
// TCG), and it takes no root port. QEMU emulates both, so it works with
// private (copy-on-write) RAM. Hot-plug only. The guest finds it by `serial`
// (the unit serial number, VPD page 0x80). Read-only unless `writable`.
struct BlockDevice {
  std::string id;
  std::string image;   // what the fd is, for the record and logs
  std::string serial;  // 1..20 chars of [A-Za-z0-9_.-]
  bool writable = false;
  int fd = -1;         // never recorded
  bool operator==(const BlockDevice&) const = default;
};
inline constexpr size_t kMaxBlockSerialLen = 20;

using Device = std::variant<NetDevice, VsockDevice, FsShare, BlockDevice>;
const std::string& DeviceId(const Device& d);
std::string_view DeviceKind(const Device& d);  // "net" | "vsock" | "fs" | "block"

struct VmSpec {
  std::string id;         // [A-Za-z0-9][A-Za-z0-9_.-]*, at most 64 chars
  std::string state_dir;  // where every file of this VM lives (see vm_paths.h)
  uint32_t vcpus = 1;
  uint32_t memory_mib = 256;
  // Direct kernel boot. An empty kernel boots nothing (firmware only): for
  // tests that need a VMM but no guest.
  std::string kernel;
  std::string initrd;
  std::string kernel_cmdline;       // the caller's base command line
  std::string extra_kernel_params;  // appended after config's kernel_params
  // nullopt: config's hypervisor.accelerator (auto|kvm|tcg) decides.
  std::optional<config::Accelerator> accelerator;
  std::vector<Device> devices;  // attached at boot
  std::string console_log;      // "" -> <state_dir>/console.log
  bool start_paused = false;    // stay paused after launch until Resume()
  // PCIe slots left free for hot-plug (QEMU: one pcie-root-port each).
  uint32_t hotplug_slots = 4;
  // A virtio-scsi controller from boot (kScsiControllerId), the bus that
  // BlockDevices hot-plug onto; without it a VM takes no disk.
  bool scsi_controller = false;
  // Guest RAM. By default a shared memfd the VMM makes (vhost-user back ends
  // map it). memory_file: a file mapped shared instead, so the RAM outlives
  // the VMM (a template's RAM image; SaveState then skips it). memory_fd: a
  // shared-memory fd the caller filled (a clone's own copy of a template's
  // RAM), inherited by the VMM; launch-only, never recorded. At most one.
  std::string memory_file;
  int memory_fd = -1;
  // memory_file or memory_fd mapped private (copy-on-write) instead of
  // shared: the guest's writes go to pages of its own and the file stays
  // untouched, so clones share the template's unwritten pages. Refused with
  // any vhost-user device: the back end maps the file itself and would never
  // see the guest's writes (silent corruption, POOL-NOTES.md). Under an
  // unprivileged VMM only a write-sealed memory_fd (ram_image.h's
  // SealedRamImage): QEMU 7.2 opens the backing read-write.
  bool memory_private = false;
  // Wait for LoadState instead of starting the guest (implies start_paused).
  bool incoming = false;
  // A VM generation id device: every VMM start draws a new id, so a restored
  // clone's id differs from its template's and Linux (CONFIG_VMGENID)
  // reseeds its RNG. Source and clone of a state must agree on it.
  bool vmgenid = false;
  // The VM's agent token (runtime/wire/agent_auth.h): 64 hex digits handed
  // to the guest as fw_cfg file guest_abi::kAgentTokenFwCfgName, never on a
  // command line (any local user reads those). Empty: none.
  std::string agent_token;
  // VMM-specific arguments appended last; an escape hatch, not an API.
  std::vector<std::string> extra_args;

  bool operator==(const VmSpec&) const = default;
};

// Limits checked before anything is started.
inline constexpr uint32_t kMaxVcpus = 255;          // QEMU q35 without x2apic IOMMU
inline constexpr uint32_t kMinMemoryMib = 16;       // below this no kernel boots
inline constexpr uint32_t kMaxHotplugSlots = 32;    // root ports behind pcie.0
inline constexpr size_t kMaxUnixPathLen = 107;      // sizeof(sockaddr_un::sun_path) - 1
inline constexpr size_t kMaxVmIdLen = 64;           // a containerd sandbox id is 64 hex chars

// Errors name the field: "vm spec 'pod1': vcpus must be 1..255, got 0".
Status ValidateVmSpec(const VmSpec& spec);
Status ValidateDevice(const Device& device);
bool IsValidDeviceId(std::string_view id);
// Names of fds passed to the VMM: the device id rules (QEMU refuses names
// that start with a digit, which it would take for fd numbers).
bool IsValidFdName(std::string_view name);

}  // namespace capsule::hypervisor
