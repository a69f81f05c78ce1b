// What a netlink dump of a netns shows of one link, for the network tests.
#pragma once

#include <gtest/gtest.h>
#include <net/if.h>

#include <string>

#include "runtime/netlink/netlink_socket.h"
#include "runtime/network/netns.h"
#include "tests/support/status_matchers.h"

namespace capsule::network::testing {

struct LinkView {
  int index = 0;  // 0: no such link
  uint32_t mtu = 0;
  bool up = false;
};

inline LinkView ViewLink(const std::string& netns, const std::string& name) {
  LinkView v;
  auto guard = NetnsGuard::Enter(netns);
  EXPECT_OK(guard);
  auto sock = netlink::NetlinkSocket::Open();
  EXPECT_OK(sock);
  if (!guard.ok() || !sock.ok()) return v;
  auto links = (*sock)->Links();
  EXPECT_OK(links);
  if (!links.ok()) return v;
  if (rtnl_link* l = rtnl_link_get_by_name(links->get(), name.c_str())) {
    v.index = rtnl_link_get_ifindex(l);
    v.mtu = rtnl_link_get_mtu(l);
    v.up = (rtnl_link_get_flags(l) & IFF_UP) != 0;
    rtnl_link_put(l);
  }
  return v;
}

}  // namespace capsule::network::testing
