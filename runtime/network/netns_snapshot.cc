// ReadNetns: one rtnetlink dump each of links, addresses and routes, taken
// from inside the pod's netns and filtered down to what the guest needs.
#include "runtime/network/netns_snapshot.h"

#include <fmt/format.h>
#include <linux/if.h>
#include <linux/if_arp.h>
#include <linux/rtnetlink.h>
#include <netlink/route/nexthop.h>

#include <array>
#include <map>

#include "runtime/netlink/netlink_socket.h"
#include "runtime/network/netns.h"
#include "runtime/network/tap_redirect.h"

namespace capsule::network {
namespace {

using netlink::AddrToString;
using netlink::MacToString;
using netlink::NetlinkSocket;
using netlink::NlCachePtr;

template <typename T>
T* As(nl_object* o) {
  return reinterpret_cast<T*>(o);
}

bool IsOurTap(const std::string& name) { return name.rfind(kTapPrefix, 0) == 0; }

// Only what a guest NIC can stand for: an up Ethernet link with a unicast
// MAC. That leaves out loopback, our taps, and the fallback tunnels the
// kernel puts into every netns when ipip/sit/gre are loaded (tunl0, sit0,
// gretap0, ...: down, and not Ethernet or without a MAC).
bool IsPodInterface(rtnl_link* l, const std::string& mac) {
  const unsigned flags = rtnl_link_get_flags(l);
  if ((flags & IFF_LOOPBACK) != 0 || (flags & IFF_UP) == 0 || rtnl_link_get_arptype(l) != ARPHRD_ETHER) return false;
  return mac.size() == 17 && mac != "00:00:00:00:00:00" && (std::stoi(mac.substr(0, 2), nullptr, 16) & 1) == 0;
}

// Interfaces by ifindex.
std::map<int, PodInterface> ReadInterfaces(nl_cache* links) {
  std::map<int, PodInterface> out;
  for (nl_object* o = nl_cache_get_first(links); o != nullptr; o = nl_cache_get_next(o)) {
    auto* l = As<rtnl_link>(o);
    const char* name = rtnl_link_get_name(l);
    if (name == nullptr || IsOurTap(name)) continue;
    std::string mac = MacToString(rtnl_link_get_addr(l));
    if (!IsPodInterface(l, mac)) continue;
    out[rtnl_link_get_ifindex(l)] = PodInterface{name, std::move(mac), rtnl_link_get_mtu(l), {}};
  }
  return out;
}

// Global-scope addresses only: link-local ones are made by each kernel
// from its own MAC, host-scope ones are loopback's.
void AddAddresses(nl_cache* addrs, std::map<int, PodInterface>& ifaces) {
  for (nl_object* o = nl_cache_get_first(addrs); o != nullptr; o = nl_cache_get_next(o)) {
    auto* a = As<rtnl_addr>(o);
    auto it = ifaces.find(rtnl_addr_get_ifindex(a));
    if (it == ifaces.end() || rtnl_addr_get_scope(a) != RT_SCOPE_UNIVERSE) continue;
    it->second.addresses.push_back(
        IpAddress{rtnl_addr_get_family(a), AddrToString(rtnl_addr_get_local(a)), rtnl_addr_get_prefixlen(a)});
  }
}

std::string Destination(rtnl_route* r) {
  nl_addr* dst = rtnl_route_get_dst(r);
  if (dst == nullptr || nl_addr_get_prefixlen(dst) == 0) return "";
  return fmt::format("{}/{}", AddrToString(dst), nl_addr_get_prefixlen(dst));
}

std::vector<Route> ReadRoutes(nl_cache* routes, const std::map<int, PodInterface>& ifaces) {
  std::vector<Route> out;
  for (nl_object* o = nl_cache_get_first(routes); o != nullptr; o = nl_cache_get_next(o)) {
    auto* r = As<rtnl_route>(o);
    const int family = rtnl_route_get_family(r);
    if ((family != AF_INET && family != AF_INET6) || rtnl_route_get_table(r) != RT_TABLE_MAIN ||
        rtnl_route_get_type(r) != RTN_UNICAST || rtnl_route_get_protocol(r) == RTPROT_KERNEL ||
        rtnl_route_get_nnexthops(r) < 1)
      continue;
    // A multipath route keeps its first hop only: CNI does not make them.
    rtnl_nexthop* nh = rtnl_route_nexthop_n(r, 0);
    auto it = ifaces.find(rtnl_route_nh_get_ifindex(nh));
    if (it == ifaces.end()) continue;
    out.push_back(Route{family, Destination(r), AddrToString(rtnl_route_nh_get_gateway(nh)), it->second.name,
                        AddrToString(rtnl_route_get_pref_src(r)), rtnl_route_get_scope(r)});
  }
  return out;
}

}  // namespace

Result<NetnsSnapshot> ReadNetns(const std::string& netns_path) {
  // The dumps are taken inside the netns; parsing them needs no namespace.
  auto dump = [&]() -> Result<std::array<NlCachePtr, 3>> {
    ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(netns_path));
    ASSIGN_OR_RETURN(std::unique_ptr<NetlinkSocket> sock, NetlinkSocket::Open());
    ASSIGN_OR_RETURN(NlCachePtr links, sock->Links());
    ASSIGN_OR_RETURN(NlCachePtr addrs, sock->Addresses());
    ASSIGN_OR_RETURN(NlCachePtr routes, sock->Routes());
    return std::array<NlCachePtr, 3>{std::move(links), std::move(addrs), std::move(routes)};
  }();
  if (!dump.ok()) return std::move(dump).status().WithContext("read pod netns " + netns_path);
  auto& [links, addrs, routes] = *dump;
  std::map<int, PodInterface> ifaces = ReadInterfaces(links.get());
  AddAddresses(addrs.get(), ifaces);
  NetnsSnapshot snap;
  snap.routes = ReadRoutes(routes.get(), ifaces);
  for (auto& [index, iface] : ifaces) snap.interfaces.push_back(std::move(iface));
  return snap;
}

}  // namespace capsule::network
