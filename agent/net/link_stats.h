// Per-interface traffic counters of the guest (the pod's network), read from
// sysfs for StatsContainer. The loopback is left out: CRI reports the pod's
// external traffic.
#pragma once

#include <string>
#include <vector>

#include "agent/net/types.h"
#include "runtime/common/status.h"

namespace capsule::agent::net {

inline constexpr const char* kSysClassNet = "/sys/class/net";

// Every interface under `sys_class_net` except lo, sorted by name.
Result<std::vector<InterfaceStats>> ReadInterfaceStats(const std::string& sys_class_net = kSysClassNet);

}  // namespace capsule::agent::net
