// Guest networking in the agent's own terms: an interface (link, MTU,
// addresses, up/down) and a route, as the host mirrors them from the pod's
// CNI result. No netlink and no protobuf here: agent/server converts the
// proto messages, netlink_network.cc talks to the kernel.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace capsule::agent::net {

struct IpAddress {
  int family = AF_INET;  // AF_INET or AF_INET6
  std::string address;   // textual, no prefix ("10.0.0.2", "fd00::2")
  uint32_t prefix_len = 0;
  bool operator==(const IpAddress&) const = default;
};

struct Interface {
  std::string name;
  std::string hw_addr;  // "aa:bb:cc:dd:ee:ff", lower case
  uint32_t mtu = 0;     // 0 in an update: leave as is
  std::vector<IpAddress> addresses;
  bool up = false;
  // Update only: the MAC to find the link by when `name` is not known in the
  // guest (the host names the tap, the guest kernel names the NIC).
  std::string device_hint;
};

// Route scopes (rtnetlink.h RT_SCOPE_*): the numbers agent.proto carries.
inline constexpr uint32_t kScopeUniverse = 0;
inline constexpr uint32_t kScopeLink = 253;
inline constexpr uint32_t kScopeHost = 254;

struct Route {
  std::string dest;     // CIDR; empty for the default route
  std::string gateway;  // empty for an on-link route
  std::string device;   // required: the link the route leaves by
  std::string source;   // preferred source address, optional
  uint32_t scope = kScopeUniverse;
  int family = AF_INET;
  bool operator==(const Route&) const = default;
};

// /sys/class/net/<name>/statistics, for StatsContainer.
struct InterfaceStats {
  std::string name;
  uint64_t rx_bytes = 0, rx_packets = 0, rx_errors = 0, rx_dropped = 0;
  uint64_t tx_bytes = 0, tx_packets = 0, tx_errors = 0, tx_dropped = 0;
};

}  // namespace capsule::agent::net
