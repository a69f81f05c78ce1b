// Devices in QEMU terms: command-line arguments for boot-time devices, and
// the QMP steps that hot-plug and remove them. A device `<id>` gets its back
// end (netdev or chardev) under id `<id>-be`.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/hypervisor/vm_spec.h"

namespace capsule::hypervisor {

struct QmpStep {
  std::string command;
  nlohmann::json arguments;
  bool operator==(const QmpStep&) const = default;
};

std::string BackendId(const Device& d);

// "-netdev ... -device ..." etc. for a device present from boot (on pcie.0).
std::vector<std::string> DeviceBootArgs(const Device& d);

// Back end first (netdev_add / chardev-add, none for kernel vhost-vsock).
std::vector<QmpStep> BackendAddSteps(const Device& d);
// device_add onto `bus` (a hot-plug root port).
QmpStep DeviceAddStep(const Device& d, const std::string& bus);
// When the back end could not be added: closefd for a tap fd passed with
// getfd that the netdev therefore never took (QEMU would keep it open).
std::vector<QmpStep> PassedFdReleaseSteps(const Device& d);
// After DEVICE_DELETED: netdev_del / chardev-remove (netdev_del also closes
// a passed tap fd).
std::vector<QmpStep> BackendRemoveSteps(const Device& d);

}  // namespace capsule::hypervisor
