#include "agent/storage/block_device.h"

#include <fmt/format.h>

#include "agent/system/sysfs_lookup.h"

namespace capsule::agent::storage {

Result<std::string> BlockDeviceBySerial(std::string_view serial, std::chrono::milliseconds wait,
                                        const std::string& sys_block, const std::string& dev_dir) {
  ASSIGN_OR_RETURN(std::string disk,
                   system::FindSysfsEntry(sys_block, "device/vpd_pg80", serial, wait, kVpdPageHeaderBytes));
  return fmt::format("{}/{}", dev_dir, disk);
}

}  // namespace capsule::agent::storage
