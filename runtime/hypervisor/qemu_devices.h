// Devices in QEMU terms: command-line arguments for boot-time devices, and
// the QMP steps that hot-plug and remove them. A device `<id>` gets its back
// end (netdev or chardev) under id `<id>-be`.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/hypervisor/vm_spec.h"

namespace capsule::hypervisor {

// How long a connect to a vhost-user back end's socket is retried while it
// is refused: the back end's socket file (which its start waits for)
// appears at bind(2), a moment before it listens.
inline constexpr std::chrono::milliseconds kVhostUserListenWait{3000};

struct QmpStep {
  std::string command;
  nlohmann::json arguments;
  bool operator==(const QmpStep&) const = default;
};

std::string BackendId(const Device& d);

// Whether the device's back end is a vhost-user socket (a chardev).
bool IsVhostUser(const Device& d);
// Whether the VMM reaches the back end through a unix socket we connect for
// it (a chardev): vhost-user devices and the serial vsock.
bool ConnectsSocket(const Device& d);
// The serial vsock's virtio-serial-pci controller, added at boot before it.
std::string SerialBusId(const Device& d);
// VmSpec::scsi_controller's virtio-scsi-pci device, and the bus on it that
// BlockDevices hot-plug onto (QEMU picks each disk's target number).
inline constexpr const char* kScsiControllerId = "scsi0";
inline constexpr const char* kScsiBusId = "scsi0.0";
// The getfd name a hot-plug passes the device's fd under: the connected
// vhost-user socket, or a kernel vsock device's vhost fd.
std::string PassedFdName(const Device& d);

// "-netdev ... -device ..." etc. for a device present from boot (on pcie.0).
// `fd` >= 0: an fd the VMM inherits for it: the tap of a NIC, the connected
// socket of a vhost-user device, the vhost fd of a kernel vsock device.
std::vector<std::string> DeviceBootArgs(const Device& d, int fd = -1);

// Back end first (netdev_add / chardev-add / blockdev-add, none for kernel
// vhost-vsock). A vhost-user chardev takes its socket from the fd passed as
// PassedFdName(d), a block device its image from fdset `fdset` (add-fd's
// answer): the VMM never opens a path of the state dir.
std::vector<QmpStep> BackendAddSteps(const Device& d, uint64_t fdset = 0);
// device_add onto `bus` (a hot-plug root port, or kScsiBusId for a disk).
QmpStep DeviceAddStep(const Device& d, const std::string& bus);
// When the back end or device could not be added: closefd for an fd passed
// with getfd (a tap, a vhost-user socket, a vhost fd) that was therefore
// never taken (QEMU would keep it open). An fd already taken makes closefd
// fail harmlessly. A block device's fdset is removed after its blockdev-add
// either way (the blockdev keeps its own dup).
std::vector<QmpStep> PassedFdReleaseSteps(const Device& d, uint64_t fdset = 0);
// After DEVICE_DELETED: netdev_del / chardev-remove / blockdev-del
// (netdev_del also closes a passed tap fd).
std::vector<QmpStep> BackendRemoveSteps(const Device& d);

}  // namespace capsule::hypervisor
