// Finding a hot-plugged virtio-blk disk by the serial the host gave it
// (hypervisor::BlockDevice::serial): the kernel shows it in
// /sys/block/<vdX>/serial once the driver probed the disk, a moment after
// the host's device_add returned.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent::storage {

// "/dev/vdb" for the disk whose serial is `serial`, waiting up to `wait` for
// it to appear; NOT_FOUND naming the serial after that.
Result<std::string> BlockDeviceBySerial(std::string_view serial, std::chrono::milliseconds wait,
                                        const std::string& sys_block = "/sys/block",
                                        const std::string& dev_dir = "/dev");

}  // namespace capsule::agent::storage
