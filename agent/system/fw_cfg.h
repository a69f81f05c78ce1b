// QEMU's fw_cfg device read from user space through its x86 I/O ports
// (selector 0x510, data 0x511), without the qemu_fw_cfg module: that module
// would publish every file under /sys/firmware, where a container could
// read them. Port I/O needs CAP_SYS_RAWIO, which the agent as PID 1 has and
// an unprivileged container does not. Reads are serialised: the device's
// selector and offset are one shared cursor.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent::system {

// The contents of fw_cfg file `name` (e.g. "opt/io.capsule/agent-token"),
// nullopt when the device or the file is absent. A file larger than
// `max_bytes` is INVALID_ARGUMENT naming it; no port access (not x86, no
// CAP_SYS_RAWIO) is an error naming ioperm.
Result<std::optional<std::string>> ReadFwCfgFile(std::string_view name, size_t max_bytes);

}  // namespace capsule::agent::system
