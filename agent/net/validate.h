// Checks of interface and route requests that need no kernel: names, MACs,
// MTUs, addresses, prefixes, CIDRs. Errors name the field as agent.proto
// spells it ("interface.addresses[1].prefix_len ...", "routes[0].gateway ...").
#pragma once

#include <string>
#include <string_view>

#include "agent/net/types.h"
#include "runtime/common/status.h"

namespace capsule::agent::net {

// IFNAMSIZ - 1, from linux/if.h.
inline constexpr size_t kMaxInterfaceName = 15;
// The smallest MTU IPv4 allows (RFC 791) and the largest the kernel takes.
inline constexpr uint32_t kMinMtu = 68;
inline constexpr uint32_t kMaxMtu = 65535;

// "AA:bb:..." -> "aa:bb:...", INVALID_ARGUMENT unless six hex octets.
Result<std::string> NormalizeMac(std::string_view field, const std::string& mac);
Status ValidateAddress(std::string_view field, const IpAddress& address);
Status ValidateLinkName(std::string_view field, const std::string& name);
Status ValidateInterface(const Interface& interface);
// `dest` is a CIDR ("10.0.0.0/24", "fd00::/64") or empty for default.
Status ValidateRoute(std::string_view field, const Route& route);

// Human form for messages: "default via 10.0.0.1 dev eth0".
std::string DescribeRoute(const Route& route);

}  // namespace capsule::agent::net
