// Finding a hot-plugged disk by the serial the host gave it
// (hypervisor::BlockDevice::serial): a SCSI disk on the VM's virtio-scsi
// controller, whose unit serial number (VPD page 0x80) the kernel shows in
// /sys/block/<sdX>/device/vpd_pg80 (a 4-byte page header, then the serial)
// once the disk is probed, a moment after the host's device_add returned.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent::storage {

// The VPD page header before the serial: peripheral type, page code, length.
inline constexpr size_t kVpdPageHeaderBytes = 4;

// "/dev/sdb" for the disk whose serial is `serial`, waiting up to `wait` for
// it to appear and for its device node to open; NOT_FOUND naming the serial
// after that.
Result<std::string> BlockDeviceBySerial(std::string_view serial, std::chrono::milliseconds wait,
                                        const std::string& sys_block = "/sys/block",
                                        const std::string& dev_dir = "/dev");

}  // namespace capsule::agent::storage
