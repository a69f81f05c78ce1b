// Routes of the main table: list, and replace the set. The kernel's own
// prefix routes (protocol kernel, made for each configured address) are
// kept, everything else is replaced; on-link routes go in before the
// routes whose gateway they make reachable. If an add fails, the routes
// removed are put back (best effort) before the error goes out.
#include <fmt/format.h>
#include <linux/rtnetlink.h>
#include <netlink/route/nexthop.h>

#include <algorithm>

#include "agent/net/netlink_network.h"
#include "agent/net/validate.h"
#include "runtime/common/logging.h"

namespace capsule::agent::net {
namespace {

const log::Logger kNetlinkRoutesLog("net");

bool IsMainUnicast(rtnl_route* r) {
  const int family = rtnl_route_get_family(r);
  return rtnl_route_get_table(r) == RT_TABLE_MAIN && rtnl_route_get_type(r) == RTN_UNICAST &&
         (family == AF_INET || family == AF_INET6);
}

bool Replaceable(rtnl_route* r) { return IsMainUnicast(r) && rtnl_route_get_protocol(r) != RTPROT_KERNEL; }

std::string DestOf(rtnl_route* r) {
  nl_addr* dst = rtnl_route_get_dst(r);
  if (dst == nullptr || nl_addr_get_prefixlen(dst) == 0) return "";
  return fmt::format("{}/{}", AddrToString(dst), nl_addr_get_prefixlen(dst));
}

Route RouteOf(rtnl_route* r, nl_cache* links) {
  Route out;
  out.family = rtnl_route_get_family(r);
  out.dest = DestOf(r);
  out.scope = rtnl_route_get_scope(r);
  out.source = AddrToString(rtnl_route_get_pref_src(r));
  if (rtnl_route_get_nnexthops(r) > 0) {
    rtnl_nexthop* nh = rtnl_route_nexthop_n(r, 0);
    out.gateway = AddrToString(rtnl_route_nh_get_gateway(nh));
    char name[IFNAMSIZ] = {};
    if (rtnl_link_i2name(links, rtnl_route_nh_get_ifindex(nh), name, sizeof name) != nullptr) out.device = name;
  }
  return out;
}

// On-link routes first: a gateway must be reachable when its route is added.
std::vector<size_t> AddOrder(const std::vector<Route>& routes) {
  std::vector<size_t> order(routes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return routes[a].gateway.empty() && !routes[b].gateway.empty(); });
  return order;
}

}  // namespace

Result<std::vector<Route>> NetlinkNetwork::MainRoutes(nl_cache* links) {
  ASSIGN_OR_RETURN(NlCachePtr routes, sock_->Routes());
  std::vector<Route> out;
  for (nl_object* o = nl_cache_get_first(routes.get()); o != nullptr; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    if (IsMainUnicast(r)) out.push_back(RouteOf(r, links));
  }
  return out;
}

Status NetlinkNetwork::AddRoute(nl_cache* links, const Route& route, const std::string& field) {
  const std::string what = fmt::format("{} ({})", field, DescribeRoute(route));
  const int ifindex = rtnl_link_name2i(links, route.device.c_str());
  if (ifindex <= 0) return NotFound(fmt::format("{}: no link named {}", what, route.device));
  RoutePtr r(rtnl_route_alloc());
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  if (!r || nh == nullptr) return Internal("rtnl_route_alloc: out of memory");
  rtnl_route_nh_set_ifindex(nh, ifindex);
  rtnl_route_add_nexthop(r.get(), nh);  // the route owns nh from here
  rtnl_route_set_family(r.get(), static_cast<uint8_t>(route.family));
  rtnl_route_set_table(r.get(), RT_TABLE_MAIN);
  rtnl_route_set_protocol(r.get(), RTPROT_BOOT);  // what `ip route add` uses
  // 0 leaves the scope to libnl's guess, iproute2's convention: link
  // without a gateway, universe with one.
  if (route.scope != kScopeUniverse) rtnl_route_set_scope(r.get(), static_cast<uint8_t>(route.scope));
  ASSIGN_OR_RETURN(NlAddrPtr dst, ParseAddr(route.dest, route.family));
  RETURN_IF_ERROR(sock_->Check(rtnl_route_set_dst(r.get(), dst.get()), what + ": set destination"));
  if (!route.gateway.empty()) {
    ASSIGN_OR_RETURN(NlAddrPtr gw, ParseAddr(route.gateway, route.family));
    rtnl_route_nh_set_gateway(nh, gw.get());
  }
  if (!route.source.empty()) {
    ASSIGN_OR_RETURN(NlAddrPtr src, ParseAddr(route.source, route.family));
    RETURN_IF_ERROR(sock_->Check(rtnl_route_set_pref_src(r.get(), src.get()), what + ": set source"));
  }
  sock_->ResetError();
  return sock_->Check(rtnl_route_add(sock_->get(), r.get(), NLM_F_REPLACE), what + ": add");
}

Result<std::vector<Route>> NetlinkNetwork::UpdateRoutes(const std::vector<Route>& routes) {
  for (size_t i = 0; i < routes.size(); ++i) RETURN_IF_ERROR(ValidateRoute(fmt::format("routes[{}]", i), routes[i]));
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(NlCachePtr links, sock_->Links());
  for (size_t i = 0; i < routes.size(); ++i) {
    if (rtnl_link_name2i(links.get(), routes[i].device.c_str()) <= 0)
      return NotFound(fmt::format("routes[{}] ({}): no link named {}", i, DescribeRoute(routes[i]), routes[i].device));
  }
  ASSIGN_OR_RETURN(NlCachePtr old, sock_->Routes());
  std::vector<RoutePtr> removed;
  for (nl_object* o = nl_cache_get_first(old.get()); o != nullptr; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    if (!Replaceable(r)) continue;
    sock_->ResetError();
    Status st = sock_->Check(rtnl_route_delete(sock_->get(), r, 0),
                             "delete route " + DescribeRoute(RouteOf(r, links.get())));
    // Gone already: the kernel drops routes that depended on one removed.
    if (!st.ok() && st.code() != Code::kNotFound) {
      RestoreRoutes(removed);
      return st;
    }
    nl_object_get(o);
    removed.emplace_back(r);
  }
  for (size_t i : AddOrder(routes)) {
    Status st = AddRoute(links.get(), routes[i], fmt::format("routes[{}]", i));
    if (st.ok()) continue;
    RestoreRoutes(removed);
    return st;
  }
  kNetlinkRoutesLog.Debug("routes replaced: {} removed, {} added", removed.size(), routes.size());
  return MainRoutes(links.get());
}

void NetlinkNetwork::RestoreRoutes(const std::vector<RoutePtr>& removed) {
  auto current = sock_->Routes();
  if (current.ok()) {
    for (nl_object* o = nl_cache_get_first(current->get()); o != nullptr; o = nl_cache_get_next(o)) {
      auto* r = reinterpret_cast<rtnl_route*>(o);
      if (Replaceable(r)) (void)rtnl_route_delete(sock_->get(), r, 0);
    }
  }
  for (const auto& r : removed) {
    int rc = rtnl_route_add(sock_->get(), r.get(), NLM_F_REPLACE);
    if (rc < 0) kNetlinkRoutesLog.Warn("restoring a removed route failed: {}", nl_geterror(rc));
  }
}

Result<std::vector<Route>> NetlinkNetwork::ListRoutes() {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(NlCachePtr links, sock_->Links());
  return MainRoutes(links.get());
}

}  // namespace capsule::agent::net
