// A link's IPv6 switch, /proc/sys/net/ipv6/conf/<link>/disable_ipv6: what
// turns IPv6 off on a link (all its IPv6 addresses go, the kernel's
// link-local one too) and on again (the kernel derives a new link-local
// address from the link's MAC, as when the link comes up).
#pragma once

#include <optional>
#include <string>

#include "runtime/common/status.h"

namespace capsule::agent::net {

// Whether IPv6 is on for the link; nullopt when the kernel has no IPv6.
Result<std::optional<bool>> Ipv6On(const std::string& link);
Status SetIpv6On(const std::string& link, bool on);

}  // namespace capsule::agent::net
