// ReadNetns: what CNI configured in a pod's network namespace (interfaces
// with MAC, MTU and addresses; main-table routes), read over rtnetlink so
// the shim can hand the same configuration to the guest agent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::network {

struct IpAddress {
  int family = 0;  // AF_INET / AF_INET6
  std::string address;  // "10.88.0.5", no prefix
  int prefix_len = 0;
  bool operator==(const IpAddress&) const = default;
};

struct Route {
  int family = 0;
  std::string destination;  // "" = default route, else "10.88.0.0/16"
  std::string gateway;      // "" = on-link
  std::string device;       // interface name in the netns
  std::string source;       // preferred source address, "" if none
  int scope = 0;            // RT_SCOPE_* (0 = universe)
  bool operator==(const Route&) const = default;
};

struct PodInterface {
  std::string name;
  std::string mac;  // lower-case "aa:bb:cc:dd:ee:ff"
  uint32_t mtu = 0;
  std::vector<IpAddress> addresses;  // global scope only (no fe80::, no 127/8)
  bool operator==(const PodInterface&) const = default;
};

struct NetnsSnapshot {
  std::vector<PodInterface> interfaces;
  std::vector<Route> routes;
};

// Every up Ethernet interface of the netns with a unicast MAC (so not
// loopback, not the kernel's down fallback tunnels such as tunl0), except
// our own taps (kTapPrefix), and the unicast routes of the main table
// through those interfaces.
//
// Routes with "proto kernel" are left out: the kernel makes them itself
// from an address and its prefix (the subnet route of 10.88.0.5/16, the
// IPv6 prefix and fe80::/64 routes), so the guest gets them again the moment
// the agent adds the same address; replaying them would fail with EEXIST.
// Everything else (CNI's default route, static routes, RA routes) is kept,
// in the kernel's dump order.
Result<NetnsSnapshot> ReadNetns(const std::string& netns_path);

}  // namespace capsule::network
