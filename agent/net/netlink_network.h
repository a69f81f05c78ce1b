// NetlinkNetwork: Network over rtnetlink (libnl-route-3). One socket,
// used under a mutex (libnl sockets are not thread-safe); every call reads
// fresh caches, so changes made by others (the kernel, udev) are seen.
#pragma once

#include <chrono>
#include <mutex>

#include "agent/net/network.h"
#include "runtime/netlink/netlink_socket.h"

namespace capsule::agent::net {

// How long UpdateInterface waits for a link named by MAC to appear: the host
// hot-plugs the NIC just before it asks, and PCI hot-plug plus the driver's
// probe take a while (seconds under TCG).
inline constexpr std::chrono::milliseconds kLinkAppearTimeout{20000};

// The libnl wrappers are shared with the host's pod network code.
using netlink::AddrPtr;
using netlink::AddrToString;
using netlink::LinkPtr;
using netlink::MacToString;
using netlink::NetlinkSocket;
using netlink::NlAddrPtr;
using netlink::NlCachePtr;
using netlink::ParseAddr;
using netlink::RoutePtr;

class NetlinkNetwork final : public Network {
 public:
  static Result<std::unique_ptr<NetlinkNetwork>> Open(std::chrono::milliseconds link_appear_timeout = kLinkAppearTimeout);

  Result<Interface> UpdateInterface(const Interface& want) override;
  Status SetIpv6(const std::string& name, bool on) override;
  Result<std::vector<Route>> UpdateRoutes(const std::vector<Route>& routes) override;
  Result<std::vector<Interface>> ListInterfaces() override;
  Result<std::vector<Route>> ListRoutes() override;

 private:
  NetlinkNetwork(std::unique_ptr<NetlinkSocket> sock, std::chrono::milliseconds link_appear_timeout)
      : sock_(std::move(sock)), link_appear_timeout_(link_appear_timeout) {}

  // All need mu_.
  Result<LinkPtr> FindLink(nl_cache* links, const Interface& want);
  // FindLink, waiting up to `timeout` for a link looked up by MAC to appear.
  Result<LinkPtr> AwaitLink(const Interface& want, std::chrono::milliseconds timeout);
  Status Rename(rtnl_link* link, const std::string& from, const std::string& to);
  // True when the link stayed up for it.
  Result<bool> SetMac(rtnl_link* link, const std::string& name, const std::string& mac);
  Status FreshIpv6(const std::string& name, bool mac_changed_live);
  // `why` names the link and the reason in the error.
  Status SetDown(rtnl_link* link, const std::string& why);
  Status SetLink(rtnl_link* link, const Interface& want, const std::string& name);
  // The link's addresses after: those kept (the kernel's link-local
  // included) and those added.
  Result<std::vector<IpAddress>> ReplaceAddresses(int ifindex, const std::vector<IpAddress>& want,
                                                  const std::string& name);
  static Interface Describe(rtnl_link* link, std::vector<IpAddress> addresses);
  Result<std::vector<Route>> MainRoutes(nl_cache* links);
  Status AddRoute(nl_cache* links, const Route& route, const std::string& field);
  // Puts back routes UpdateRoutes removed, after a failed add (best effort).
  void RestoreRoutes(const std::vector<RoutePtr>& removed);

  std::mutex mu_;
  const std::unique_ptr<NetlinkSocket> sock_;  // used under mu_
  const std::chrono::milliseconds link_appear_timeout_;
};

}  // namespace capsule::agent::net
