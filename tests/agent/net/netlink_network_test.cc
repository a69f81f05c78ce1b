// NetlinkNetwork against the kernel, in the test's private network
// namespace (netns_main.cc) on veth pairs: links found by name or MAC,
// MTU/addresses/up applied and read back, the route table replaced, and
// errors that name the link or route (with the old routes put back).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "agent/net/netlink_network.h"
#include "agent/net/validate.h"
#include "tests/agent/net/netns_links.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::net {
namespace {

using testing::Ip;
using testing::VethPair;

bool Has(const std::vector<IpAddress>& v, const IpAddress& a) { return std::find(v.begin(), v.end(), a) != v.end(); }

bool HasRoute(const std::vector<Route>& routes, const std::string& dest, const std::string& gateway,
              const std::string& device) {
  return std::any_of(routes.begin(), routes.end(), [&](const Route& r) {
    return r.dest == dest && r.gateway == gateway && r.device == device;
  });
}

std::vector<std::string> Described(const std::vector<Route>& routes) {
  std::vector<std::string> out;
  for (const Route& r : routes)
    out.push_back(fmt::format("family {} {} scope {}", r.family, DescribeRoute(r), r.scope));
  std::sort(out.begin(), out.end());
  return out;
}

class NetlinkNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::InPrivateNetns()) GTEST_SKIP() << "needs root (runs in a private network namespace)";
    auto n = NetlinkNetwork::Open(std::chrono::milliseconds(1500));
    ASSERT_OK(n);
    net_ = std::move(n).value();
  }
  void TearDown() override {
    if (net_) {
      EXPECT_OK(net_->UpdateRoutes({}));
    }
  }
  // UpdateRoutes' answer is the table as a dump finds it, field for field,
  // whatever produces it (an answer told from the request would have to
  // mirror the kernel's scope guesses and its IPv6 prefix masking).
  void ExpectTheKernelsTable(const std::vector<Route>& answered) {
    auto listed = net_->ListRoutes();
    ASSERT_OK(listed);
    EXPECT_EQ(Described(answered), Described(*listed));
  }
  std::unique_ptr<NetlinkNetwork> net_;
};

TEST_F(NetlinkNetworkTest, UpdateInterfaceSetsMtuReplacesAddressesAndBringsItUp) {
  VethPair veth("nt-a0", "nt-b0");
  Interface want{"nt-a0", "", 1400, {{AF_INET, "10.10.0.2", 24}, {AF_INET6, "fd00::2", 64}}, true, ""};
  auto got = net_->UpdateInterface(want);
  ASSERT_OK(got);
  EXPECT_EQ(got->name, "nt-a0");
  EXPECT_EQ(got->mtu, 1400u);
  EXPECT_TRUE(got->up);
  EXPECT_TRUE(Has(got->addresses, {AF_INET, "10.10.0.2", 24}));
  EXPECT_TRUE(Has(got->addresses, {AF_INET6, "fd00::2", 64}));
  // The set is replaced, not merged.
  want.addresses = {{AF_INET, "10.10.0.3", 24}};
  want.up = false;
  got = net_->UpdateInterface(want);
  ASSERT_OK(got);
  EXPECT_FALSE(got->up);
  EXPECT_TRUE(Has(got->addresses, {AF_INET, "10.10.0.3", 24}));
  EXPECT_FALSE(Has(got->addresses, {AF_INET, "10.10.0.2", 24}));
  EXPECT_FALSE(Has(got->addresses, {AF_INET6, "fd00::2", 64}));
  auto list = net_->ListInterfaces();
  ASSERT_OK(list);
  auto it = std::find_if(list->begin(), list->end(), [](const Interface& i) { return i.name == "nt-a0"; });
  ASSERT_NE(it, list->end());
  EXPECT_EQ(it->mtu, 1400u);
  EXPECT_EQ(it->addresses, got->addresses);
  EXPECT_EQ(it->hw_addr.size(), 17u);
}

TEST_F(NetlinkNetworkTest, DeviceHintFindsTheLinkByMacAndRenamesIt) {
  VethPair veth("nt-a1", "nt-b1");
  Ip({"link", "set", "nt-b1", "address", "02:00:00:00:00:42"});
  // "nt-a1" exists too: the MAC wins over the name.
  Interface want{"nt-g1", "", 1300, {{AF_INET, "10.11.0.2", 24}}, true, "02:00:00:00:00:42"};
  auto got = net_->UpdateInterface(want);
  ASSERT_OK(got);
  EXPECT_EQ(got->name, "nt-g1");
  EXPECT_EQ(got->hw_addr, "02:00:00:00:00:42");
  EXPECT_EQ(got->mtu, 1300u);
  EXPECT_TRUE(got->up);
  EXPECT_TRUE(Has(got->addresses, {AF_INET, "10.11.0.2", 24}));
  want.device_hint = "02:00:00:00:00:43";
  auto missing = net_->UpdateInterface(want);
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("nt-g1"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("02:00:00:00:00:43"), std::string::npos);
  EXPECT_NE(missing.status().message().find("waited 1500 ms"), std::string::npos) << missing.status().message();
}

TEST_F(NetlinkNetworkTest, DeviceHintWithHwAddrGivesTheLinkANewMac) {
  // A NIC plugged at boot with a throwaway MAC takes on the pod's.
  VethPair veth("nt-a4", "nt-b4");
  Ip({"link", "set", "nt-b4", "address", "02:00:00:00:00:44"});
  Interface want{"nt-g4", "0A:58:0A:00:00:07", 1400, {{AF_INET, "10.12.0.2", 24}}, true, "02:00:00:00:00:44"};
  auto got = net_->UpdateInterface(want);
  ASSERT_OK(got);
  EXPECT_EQ(got->name, "nt-g4");
  EXPECT_EQ(got->hw_addr, "0a:58:0a:00:00:07");
  EXPECT_TRUE(got->up);
  // Found again by the new MAC; the old one names nothing now.
  want.device_hint = "0a:58:0a:00:00:07";
  EXPECT_OK(net_->UpdateInterface(want));
  Interface stale{"", "", 0, {}, true, "02:00:00:00:00:44"};
  EXPECT_EQ(net_->UpdateInterface(stale).status().code(), Code::kNotFound);
}

TEST_F(NetlinkNetworkTest, AnUpLinkTakesANewMacWithoutGoingDown) {
  // A pooled VM's boot NIC idles up; the claim gives it the pod's MAC live.
  // Down and up again, the kernel would drop the routes through it.
  VethPair veth("nt-a5", "nt-b5");
  Ip({"link", "set", "nt-b5", "address", "02:00:00:00:00:45"});
  ASSERT_OK(net_->UpdateInterface({"nt-b5", "", 0, {{AF_INET, "10.13.0.2", 24}}, true, ""}));
  Ip({"link", "set", "nt-a5", "up"});
  ASSERT_OK(net_->UpdateRoutes({{"10.14.0.0/16", "10.13.0.1", "nt-b5", "", kScopeUniverse, AF_INET}}));
  Interface want{"nt-b5", "0a:58:0a:0d:00:02", 0, {{AF_INET, "10.13.0.2", 24}}, true, "02:00:00:00:00:45"};
  auto got = net_->UpdateInterface(want);
  ASSERT_OK(got);
  EXPECT_EQ(got->hw_addr, "0a:58:0a:0d:00:02");
  EXPECT_TRUE(got->up);
  // Its IPv6 link-local address follows the MAC (EUI-64), as after a link
  // up: clones of one template would otherwise all keep the template's.
  EXPECT_TRUE(Has(got->addresses, {AF_INET6, "fe80::858:aff:fe0d:2", 64})) << got->addresses.size() << " addresses";
  EXPECT_FALSE(Has(got->addresses, {AF_INET6, "fe80::ff:fe00:45", 64}));
  auto routes = net_->ListRoutes();
  ASSERT_OK(routes);
  EXPECT_TRUE(HasRoute(*routes, "10.14.0.0/16", "10.13.0.1", "nt-b5")) << "the link went down for its new MAC";
}

TEST_F(NetlinkNetworkTest, ALinkIdlingWithoutIpv6HasItAgainWithItsNewMac) {
  // How a pooled VM's boot NIC idles: up, IPv6 off, so no link-local address
  // from the template's MAC. The claim's new MAC brings IPv6 back.
  VethPair veth("nt-a6", "nt-b6");
  Ip({"link", "set", "nt-b6", "address", "02:00:00:00:00:46"});
  Ip({"link", "set", "nt-a6", "up"});
  ASSERT_OK(net_->UpdateInterface({"nt-b6", "", 0, {}, true, ""}));
  ASSERT_OK(net_->SetIpv6("nt-b6", false));
  auto list = net_->ListInterfaces();
  ASSERT_OK(list);
  auto it = std::find_if(list->begin(), list->end(), [](const Interface& i) { return i.name == "nt-b6"; });
  ASSERT_NE(it, list->end());
  EXPECT_TRUE(it->addresses.empty()) << "IPv6 off leaves no link-local address";
  auto got = net_->UpdateInterface({"nt-b6", "0a:58:0a:0e:00:02", 0, {{AF_INET, "10.15.0.2", 24}}, true,
                                    "02:00:00:00:00:46"});
  ASSERT_OK(got);
  EXPECT_TRUE(Has(got->addresses, {AF_INET6, "fe80::858:aff:fe0e:2", 64}));
  EXPECT_TRUE(Has(got->addresses, {AF_INET, "10.15.0.2", 24}));
  EXPECT_EQ(net_->SetIpv6("../all", false).code(), Code::kInvalidArgument);
}

TEST_F(NetlinkNetworkTest, UpdateInterfaceWaitsForALinkThatAppearsLater) {
  // What a hot-plugged NIC looks like to the agent: asked for before the
  // guest kernel has created it.
  std::optional<VethPair> veth;
  std::thread plug([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    veth.emplace("nt-a9", "nt-b9");
    Ip({"link", "set", "nt-b9", "address", "02:00:00:00:00:99"});
  });
  auto got = net_->UpdateInterface({"nt-g9", "", 0, {}, true, "02:00:00:00:00:99"});
  plug.join();
  ASSERT_OK(got);
  EXPECT_EQ(got->name, "nt-g9");
}

TEST_F(NetlinkNetworkTest, KernelErrorsNameTheInterface) {
  VethPair veth("nt-a2", "nt-b2");  // deleting it takes the macvlan on it along
  testing::Ip({"link", "add", "nt-m2", "link", "nt-a2", "type", "macvlan"});
  // A macvlan's MTU cannot exceed its lower link's (1500): the kernel says EINVAL.
  Interface too_big{"nt-m2", "", 9000, {}, true, ""};
  auto got = net_->UpdateInterface(too_big);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("interface nt-m2"), std::string::npos) << got.status().message();
}

TEST_F(NetlinkNetworkTest, UpdateRoutesReplacesTheTableAndKeepsKernelPrefixRoutes) {
  VethPair veth("nt-a3", "nt-b3");
  ASSERT_OK(net_->UpdateInterface({"nt-a3", "", 0, {{AF_INET, "10.30.0.2", 24}}, true, ""}));
  Ip({"link", "set", "nt-b3", "up"});
  std::vector<Route> first = {{"", "10.30.0.1", "nt-a3", "", kScopeUniverse, AF_INET},
                              {"10.31.0.0/16", "", "nt-a3", "10.30.0.2", kScopeLink, AF_INET}};
  auto routes = net_->UpdateRoutes(first);
  ASSERT_OK(routes);
  ExpectTheKernelsTable(*routes);
  EXPECT_TRUE(HasRoute(*routes, "", "10.30.0.1", "nt-a3"));
  EXPECT_TRUE(HasRoute(*routes, "10.31.0.0/16", "", "nt-a3"));
  EXPECT_TRUE(HasRoute(*routes, "10.30.0.0/24", "", "nt-a3")) << "the kernel's prefix route must stay";
  std::vector<Route> second = {{"192.168.5.0/24", "10.30.0.1", "nt-a3", "", kScopeUniverse, AF_INET}};
  routes = net_->UpdateRoutes(second);
  ASSERT_OK(routes);
  EXPECT_FALSE(HasRoute(*routes, "", "10.30.0.1", "nt-a3"));
  EXPECT_FALSE(HasRoute(*routes, "10.31.0.0/16", "", "nt-a3"));
  EXPECT_TRUE(HasRoute(*routes, "192.168.5.0/24", "10.30.0.1", "nt-a3"));
  EXPECT_TRUE(HasRoute(*routes, "10.30.0.0/24", "", "nt-a3"));
  ExpectTheKernelsTable(*routes);
}

TEST_F(NetlinkNetworkTest, AFailedRouteIsNamedAndTheOldTableComesBack) {
  VethPair veth("nt-a4", "nt-b4");
  ASSERT_OK(net_->UpdateInterface({"nt-a4", "", 0, {{AF_INET, "10.40.0.2", 24}}, true, ""}));
  Ip({"link", "set", "nt-b4", "up"});
  ASSERT_OK(net_->UpdateRoutes({{"", "10.40.0.1", "nt-a4", "", kScopeUniverse, AF_INET}}));
  // 10.99.0.1 is on no link: the kernel refuses the gateway.
  auto bad = net_->UpdateRoutes({{"10.50.0.0/16", "", "nt-a4", "", kScopeLink, AF_INET},
                                 {"", "10.99.0.1", "nt-a4", "", kScopeUniverse, AF_INET}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("routes[1] (default via 10.99.0.1 dev nt-a4)"), std::string::npos)
      << bad.status().message();
  auto now = net_->ListRoutes();
  ASSERT_OK(now);
  EXPECT_TRUE(HasRoute(*now, "", "10.40.0.1", "nt-a4")) << "old default route not restored";
  EXPECT_FALSE(HasRoute(*now, "10.50.0.0/16", "", "nt-a4")) << "half-applied route left";
  auto no_dev = net_->UpdateRoutes({{"", "10.40.0.1", "nt-zz", "", kScopeUniverse, AF_INET}});
  EXPECT_EQ(no_dev.status().code(), Code::kNotFound);
  EXPECT_NE(no_dev.status().message().find("routes[0] (default via 10.40.0.1 dev nt-zz): no link named nt-zz"),
            std::string::npos)
      << no_dev.status().message();
}

TEST_F(NetlinkNetworkTest, Ipv6RoutesToo) {
  VethPair veth("nt-a5", "nt-b5");
  ASSERT_OK(net_->UpdateInterface({"nt-a5", "", 0, {{AF_INET6, "fd05::2", 64}}, true, ""}));
  Ip({"link", "set", "nt-b5", "up"});
  // Host bits in an IPv6 destination: the kernel keeps the prefix only.
  auto routes = net_->UpdateRoutes({{"fd06::9/64", "", "nt-a5", "", kScopeUniverse, AF_INET6},
                                    {"fd07::/48", "fd05::1", "nt-a5", "", kScopeUniverse, AF_INET6}});
  ASSERT_OK(routes);
  ExpectTheKernelsTable(*routes);
  auto it = std::find_if(routes->begin(), routes->end(), [](const Route& r) { return r.dest == "fd06::/64"; });
  ASSERT_NE(it, routes->end());
  EXPECT_EQ(it->family, AF_INET6);
  EXPECT_EQ(it->device, "nt-a5");
  EXPECT_TRUE(HasRoute(*routes, "fd07::/48", "fd05::1", "nt-a5"));
}

}  // namespace
}  // namespace capsule::agent::net
