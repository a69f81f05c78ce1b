// Finding a guest device by one of its sysfs attributes: the entry of a
// class or block directory (/sys/class/virtio-ports, /sys/block) whose
// attribute file (name, serial) holds a given value. Devices the host
// hot-plugs or announces appear there a moment after the driver hears of
// them, so the lookup can wait.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent::system {

// The name of the entry of `dir` whose `attribute` file (a path below the
// entry) reads `value` after its first `value_offset` bytes (a binary
// header), trailing newlines, NULs and spaces ignored, polling every 2 ms for
// up to `wait` (zero: look once). NOT_FOUND naming the value and the dir.
Result<std::string> FindSysfsEntry(const std::string& dir, std::string_view attribute, std::string_view value,
                                   std::chrono::milliseconds wait = std::chrono::milliseconds(0),
                                   size_t value_offset = 0);

}  // namespace capsule::agent::system
