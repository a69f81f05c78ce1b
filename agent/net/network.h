// Network: the guest's links, addresses and routes, as the agent's network
// RPCs change and list them. Implemented over rtnetlink by NetlinkNetwork;
// it acts on the network namespace of the calling process (the VM's, or a
// test's private one).
#pragma once

#include <memory>
#include <vector>

#include "agent/net/types.h"
#include "runtime/common/status.h"

namespace capsule::agent::net {

class Network {
 public:
  virtual ~Network() = default;

  // Finds the link by name, else by MAC (device_hint, else hw_addr); sets
  // the MTU (when non-zero), replaces its addresses with `want.addresses`
  // (IPv6 link-local ones the kernel made stay unless listed) and brings it
  // up or down. Returns the link as it is afterwards. A link given a new
  // MAC (device_hint and hw_addr) has IPv6 on afterwards, with the kernel's
  // link-local address derived from the new MAC.
  virtual Result<Interface> UpdateInterface(const Interface& want) = 0;
  // IPv6 on or off on the link named `name`. Off, it has no IPv6 address,
  // not even the kernel's link-local one.
  virtual Status SetIpv6(const std::string& name, bool on) = 0;
  // Replaces the main table's routes (all but the kernel's own prefix
  // routes of configured addresses) with `routes`; returns the new table.
  virtual Result<std::vector<Route>> UpdateRoutes(const std::vector<Route>& routes) = 0;
  virtual Result<std::vector<Interface>> ListInterfaces() = 0;
  // The main routing table.
  virtual Result<std::vector<Route>> ListRoutes() = 0;
};

using NetworkPtr = std::unique_ptr<Network>;

}  // namespace capsule::agent::net
