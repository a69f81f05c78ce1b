// Links and addresses: find a link by name or MAC, set MTU and up/down,
// replace its address set, describe it back.
#include "agent/net/netlink_network.h"

#include <fmt/format.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

#include "agent/net/ipv6_conf.h"
#include "agent/net/validate.h"
#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::net {
namespace {

const log::Logger kNetlinkNetworkLog("net");

bool IsKernelLinkLocal(const IpAddress& a) { return a.family == AF_INET6 && a.address.rfind("fe80:", 0) == 0; }

IpAddress AddressOf(rtnl_addr* a) {
  return IpAddress{rtnl_addr_get_family(a), AddrToString(rtnl_addr_get_local(a)),
                   static_cast<uint32_t>(rtnl_addr_get_prefixlen(a))};
}

// Addresses of `ifindex` in `addrs`, with their libnl objects (referenced).
std::vector<std::pair<IpAddress, AddrPtr>> AddressesOf(nl_cache* addrs, int ifindex) {
  std::vector<std::pair<IpAddress, AddrPtr>> out;
  for (nl_object* o = nl_cache_get_first(addrs); o != nullptr; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_ifindex(a) != ifindex) continue;
    nl_object_get(o);
    out.emplace_back(AddressOf(a), AddrPtr(a));
  }
  return out;
}

// The link as the kernel has it now (one request); a link gone meanwhile
// is named with what it was going through.
Result<LinkPtr> LinkNow(NetlinkSocket& sock, int ifindex, const std::string& name, std::string_view during) {
  auto link = sock.Link(ifindex);
  if (!link.ok() && link.status().code() == Code::kNotFound)
    return NotFound(fmt::format("interface {} vanished while being {}", name, during));
  return link;
}

}  // namespace

Result<std::unique_ptr<NetlinkNetwork>> NetlinkNetwork::Open(std::chrono::milliseconds link_appear_timeout) {
  ASSIGN_OR_RETURN(std::unique_ptr<NetlinkSocket> sock, NetlinkSocket::Open());
  return std::unique_ptr<NetlinkNetwork>(new NetlinkNetwork(std::move(sock), link_appear_timeout));
}

Result<LinkPtr> NetlinkNetwork::FindLink(nl_cache* links, const Interface& want) {
  // The MAC first: it is the one identity the host and the guest agree on
  // (the host names the tap, the guest kernel names the NIC, and a name such
  // as "eth0" may already belong to another link).
  const std::string& mac_field = want.device_hint.empty() ? want.hw_addr : want.device_hint;
  if (!mac_field.empty()) {
    ASSIGN_OR_RETURN(std::string mac, NormalizeMac("interface.device_hint", mac_field));
    for (nl_object* o = nl_cache_get_first(links); o != nullptr; o = nl_cache_get_next(o)) {
      auto* l = reinterpret_cast<rtnl_link*>(o);
      if (MacToString(rtnl_link_get_addr(l)) != mac) continue;
      nl_object_get(o);
      return LinkPtr(l);
    }
    return NotFound(fmt::format("interface {}: no link with MAC {}", want.name.empty() ? "(unnamed)" : want.name,
                                mac));
  }
  if (rtnl_link* l = rtnl_link_get_by_name(links, want.name.c_str())) return LinkPtr(l);
  return NotFound(fmt::format("interface {}: no such link", want.name));
}

Result<LinkPtr> NetlinkNetwork::AwaitLink(const Interface& want, std::chrono::milliseconds timeout) {
  // Subscribe before the first look, so a link that appears in between is
  // not missed. Only MAC lookups wait: a hot-plugged NIC shows up some time
  // after the VMM reported the device added (PCI hot-plug, driver probe).
  const bool by_mac = !want.device_hint.empty() || !want.hw_addr.empty();
  UniqueFd events;
  if (by_mac && timeout.count() > 0) {
    events.reset(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
    if (!events) return ErrnoStatus("netlink socket for link events");
    sockaddr_nl sa{};
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = RTMGRP_LINK;
    if (::bind(events.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      return ErrnoStatus("bind netlink socket to RTMGRP_LINK");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ASSIGN_OR_RETURN(NlCachePtr links, sock_->Links());
    Result<LinkPtr> link = FindLink(links.get(), want);
    if (link.ok() || link.status().code() != Code::kNotFound || !events) return link;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return NotFound(fmt::format("{} (waited {} ms for it to appear)", link.status().message(), timeout.count()));
    pollfd p{events.get(), POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll netlink link events");
    char drain[8192];
    while (::recv(events.get(), drain, sizeof drain, 0) > 0) {
    }
  }
}

Status NetlinkNetwork::SetDown(rtnl_link* link, const std::string& why) {
  LinkPtr down(rtnl_link_alloc());
  if (!down) return Internal("rtnl_link_alloc: out of memory");
  rtnl_link_unset_flags(down.get(), IFF_UP);
  sock_->ResetError();
  return sock_->Check(rtnl_link_change(sock_->get(), link, down.get(), 0), why);
}

Status NetlinkNetwork::Rename(rtnl_link* link, const std::string& from, const std::string& to) {
  // The kernel renames only a link that is down.
  RETURN_IF_ERROR(SetDown(link, fmt::format("interface {}: set down to rename it to {}", from, to)));
  LinkPtr rename(rtnl_link_alloc());
  if (!rename) return Internal("rtnl_link_alloc: out of memory");
  rtnl_link_set_name(rename.get(), to.c_str());
  sock_->ResetError();
  Status renamed = sock_->Check(rtnl_link_change(sock_->get(), link, rename.get(), 0),
                                fmt::format("interface {}: rename to {}", from, to));
  if (!renamed.ok() && (rtnl_link_get_flags(link) & IFF_UP) != 0) {
    LinkPtr up(rtnl_link_alloc());  // leave it as it was
    if (up) {
      rtnl_link_set_flags(up.get(), IFF_UP);
      sock_->ResetError();
      (void)rtnl_link_change(sock_->get(), link, up.get(), 0);
    }
  }
  return renamed;
}

Result<bool> NetlinkNetwork::SetMac(rtnl_link* link, const std::string& name, const std::string& mac) {
  nl_addr* parsed = nullptr;
  if (nl_addr_parse(mac.c_str(), AF_LLC, &parsed) != 0 || parsed == nullptr)
    return InvalidArgument(fmt::format("interface {}: MAC {} does not parse", name, mac));
  NlAddrPtr addr(parsed);
  LinkPtr change(rtnl_link_alloc());
  if (!change) return Internal("rtnl_link_alloc: out of memory");
  rtnl_link_set_addr(change.get(), addr.get());
  const std::string what = fmt::format("interface {}: set MAC {}", name, mac);
  // While up first: virtio-net changes its address live, through its
  // control queue (QEMU's receive filter follows), and a link that stays up
  // keeps its filled receive ring and the routes through it. Taking it down
  // and up again cost a claim 7-19 ms under TCG. A driver that cannot change
  // it live answers EBUSY; then down first.
  if ((rtnl_link_get_flags(link) & IFF_UP) != 0) {
    sock_->ResetError();
    const int rc = rtnl_link_change(sock_->get(), link, change.get(), 0);
    if (rc >= 0) return true;
    if (sock_->last_errno() != EBUSY) return sock_->Check(rc, what);
  }
  RETURN_IF_ERROR(SetDown(link, fmt::format("interface {}: set down to change its MAC", name)));
  sock_->ResetError();
  RETURN_IF_ERROR(sock_->Check(rtnl_link_change(sock_->get(), link, change.get(), 0), what));
  return false;
}

// The kernel derives a link's IPv6 link-local address from its MAC when
// IPv6 starts on the link (link up, or IPv6 on), and keeps it through a live
// MAC change: a NIC cloned from a template would go on with the
// template's, the same in every clone. So IPv6 restarts on it. A pooled
// VM's boot NIC idles with IPv6 off (Rehearse), so its claim only turns it
// on, which costs half of off and on again.
Status NetlinkNetwork::FreshIpv6(const std::string& name, bool mac_changed_live) {
  ASSIGN_OR_RETURN(std::optional<bool> on, Ipv6On(name));
  if (!on) return Status::Ok();  // no IPv6 in this kernel
  if (*on && !mac_changed_live) return Status::Ok();  // it starts when the link comes up
  if (*on) RETURN_IF_ERROR(SetIpv6On(name, false));
  return SetIpv6On(name, true);
}

Status NetlinkNetwork::SetIpv6(const std::string& name, bool on) {
  RETURN_IF_ERROR(ValidateLinkName("interface", name));
  std::lock_guard lock(mu_);
  return SetIpv6On(name, on);
}

Status NetlinkNetwork::SetLink(rtnl_link* link, const Interface& want, const std::string& name) {
  LinkPtr change(rtnl_link_alloc());
  if (!change) return Internal("rtnl_link_alloc: out of memory");
  if (want.mtu != 0) rtnl_link_set_mtu(change.get(), want.mtu);
  if (want.up) {
    rtnl_link_set_flags(change.get(), IFF_UP);
  } else {
    rtnl_link_unset_flags(change.get(), IFF_UP);
  }
  sock_->ResetError();
  return sock_->Check(rtnl_link_change(sock_->get(), link, change.get(), 0),
                      fmt::format("interface {}: set mtu {} and {}", name, want.mtu, want.up ? "up" : "down"));
}

Result<std::vector<IpAddress>> NetlinkNetwork::ReplaceAddresses(int ifindex, const std::vector<IpAddress>& want,
                                                                const std::string& name) {
  ASSIGN_OR_RETURN(NlCachePtr addrs, sock_->Addresses());
  auto have = AddressesOf(addrs.get(), ifindex);
  std::vector<IpAddress> kept;
  for (auto& [address, obj] : have) {
    if (std::find(want.begin(), want.end(), address) != want.end() || IsKernelLinkLocal(address)) {
      kept.push_back(address);
      continue;
    }
    sock_->ResetError();
    RETURN_IF_ERROR(sock_->Check(rtnl_addr_delete(sock_->get(), obj.get(), 0),
                                 fmt::format("interface {}: delete address {}/{}", name, address.address,
                                             address.prefix_len)));
  }
  for (const IpAddress& a : want) {
    if (std::any_of(have.begin(), have.end(), [&](const auto& h) { return h.first == a; })) continue;
    AddrPtr add(rtnl_addr_alloc());
    ASSIGN_OR_RETURN(NlAddrPtr local, ParseAddr(a.address, a.family));
    if (!add) return Internal("rtnl_addr_alloc: out of memory");
    rtnl_addr_set_ifindex(add.get(), ifindex);
    rtnl_addr_set_family(add.get(), a.family);
    RETURN_IF_ERROR(sock_->Check(rtnl_addr_set_local(add.get(), local.get()), "set address"));
    rtnl_addr_set_prefixlen(add.get(), static_cast<int>(a.prefix_len));
    sock_->ResetError();
    RETURN_IF_ERROR(sock_->Check(rtnl_addr_add(sock_->get(), add.get(), 0),
                                 fmt::format("interface {}: add address {}/{}", name, a.address, a.prefix_len)));
    kept.push_back(a);
  }
  // As the kernel lists them: IPv4 before IPv6.
  std::stable_sort(kept.begin(), kept.end(), [](const IpAddress& x, const IpAddress& y) { return x.family < y.family; });
  return kept;
}

Interface NetlinkNetwork::Describe(rtnl_link* link, std::vector<IpAddress> addresses) {
  Interface out;
  out.name = rtnl_link_get_name(link) ? rtnl_link_get_name(link) : "";
  out.hw_addr = MacToString(rtnl_link_get_addr(link));
  out.mtu = rtnl_link_get_mtu(link);
  out.up = (rtnl_link_get_flags(link) & IFF_UP) != 0;
  out.addresses = std::move(addresses);
  return out;
}

Result<Interface> NetlinkNetwork::UpdateInterface(const Interface& want) {
  RETURN_IF_ERROR(ValidateInterface(want));
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(LinkPtr link, AwaitLink(want, link_appear_timeout_));
  std::string name = rtnl_link_get_name(link.get());
  const int ifindex = rtnl_link_get_ifindex(link.get());
  // hw_addr beside device_hint: the NIC is found by its current MAC and
  // given this one (a NIC plugged at boot taking on the pod's identity).
  if (!want.device_hint.empty() && !want.hw_addr.empty()) {
    ASSIGN_OR_RETURN(std::string mac, NormalizeMac("interface.hw_addr", want.hw_addr));
    if (mac != MacToString(rtnl_link_get_addr(link.get()))) {
      ASSIGN_OR_RETURN(const bool live, SetMac(link.get(), name, mac));
      RETURN_IF_ERROR(FreshIpv6(name, live));
      kNetlinkNetworkLog.Debug("interface {}: MAC set to {}{}", name, mac, live ? " while up" : "");
    }
  }
  if (!want.name.empty() && want.name != name) {
    RETURN_IF_ERROR(Rename(link.get(), name, want.name));
    kNetlinkNetworkLog.Info("interface {} renamed to {}", name, want.name);
    name = want.name;
    ASSIGN_OR_RETURN(link, LinkNow(*sock_, ifindex, name, "renamed"));
  }
  RETURN_IF_ERROR(SetLink(link.get(), want, name));
  ASSIGN_OR_RETURN(std::vector<IpAddress> addresses, ReplaceAddresses(ifindex, want.addresses, name));
  // The answer is the link as the kernel reports it now, with the address
  // set ReplaceAddresses read and changed: one request instead of dumping
  // every link and address again (each a millisecond or more of guest time
  // under TCG, on a claim's path).
  ASSIGN_OR_RETURN(LinkPtr now, LinkNow(*sock_, ifindex, name, "updated"));
  kNetlinkNetworkLog.Debug("interface {}: mtu {}, {} addresses, {}", name, rtnl_link_get_mtu(now.get()),
                           addresses.size(), want.up ? "up" : "down");
  return Describe(now.get(), std::move(addresses));
}

Result<std::vector<Interface>> NetlinkNetwork::ListInterfaces() {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(NlCachePtr links, sock_->Links());
  ASSIGN_OR_RETURN(NlCachePtr addrs, sock_->Addresses());
  std::vector<Interface> out;
  for (nl_object* o = nl_cache_get_first(links.get()); o != nullptr; o = nl_cache_get_next(o)) {
    auto* l = reinterpret_cast<rtnl_link*>(o);
    std::vector<IpAddress> addresses;
    for (auto& [address, obj] : AddressesOf(addrs.get(), rtnl_link_get_ifindex(l))) addresses.push_back(address);
    out.push_back(Describe(l, std::move(addresses)));
  }
  return out;
}

}  // namespace capsule::agent::net
