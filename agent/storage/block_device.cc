#include "agent/storage/block_device.h"

#include <fcntl.h>

#include <cerrno>

#include <fmt/format.h>

#include "agent/system/sysfs_lookup.h"
#include "runtime/common/backoff.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::storage {

Result<std::string> BlockDeviceBySerial(std::string_view serial, std::chrono::milliseconds wait,
                                        const std::string& sys_block, const std::string& dev_dir) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  ASSIGN_OR_RETURN(std::string disk,
                   system::FindSysfsEntry(sys_block, "device/vpd_pg80", serial, wait, kVpdPageHeaderBytes));
  // The kernel names the disk in sysfs (and devtmpfs makes its node) a
  // moment before the block device can be opened: until then open(2), and
  // so a mount, fails with ENXIO.
  const std::string node = fmt::format("{}/{}", dev_dir, disk);
  int err = 0;  // of the last open; anything but ENXIO or ENOENT ends the wait
  const bool settled = WaitUntil(
      [&] {
        err = UniqueFd(::open(node.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) ? 0 : errno;
        return err != ENXIO && err != ENOENT;
      },
      std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()),
      {std::chrono::milliseconds(2), std::chrono::milliseconds(2)});
  if (!settled)
    return NotFound(fmt::format("disk {} (serial '{}') is in {} but could not be opened within {} ms: {}", node,
                                serial, sys_block, wait.count(), err == ENXIO ? "not ready" : "no device node"));
  if (err != 0) return ErrnoStatus(fmt::format("open disk {} (serial '{}')", node, serial), err);
  return node;
}

}  // namespace capsule::agent::storage
