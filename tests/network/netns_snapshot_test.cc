// ReadNetns against a real netns set up like CNI's bridge plugin does.
#include "runtime/network/netns_snapshot.h"

#include <gmock/gmock.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "runtime/network/tap_redirect.h"
#include "tests/network/pod_netns_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::network {
namespace {

using ::testing::HasSubstr;
using testing::kPodIf;
using testing::kPodMac;
using testing::kPodMtu;

using ReadNetnsTest = testing::PodNetnsTest;

TEST_F(ReadNetnsTest, ReturnsThePodInterfaceWithMacMtuAndGlobalAddresses) {
  auto snap = ReadNetns(pod());
  ASSERT_OK(snap);
  ASSERT_EQ(snap->interfaces.size(), 1u) << "lo must be left out";
  const PodInterface& eth = snap->interfaces[0];
  EXPECT_EQ(eth.name, kPodIf);
  EXPECT_EQ(eth.mac, kPodMac);
  EXPECT_EQ(eth.mtu, kPodMtu);
  // The kernel's fe80:: address is left out.
  EXPECT_THAT(eth.addresses, ::testing::UnorderedElementsAre(IpAddress{AF_INET, "10.88.0.5", 16},
                                                             IpAddress{AF_INET6, "2001:db8::5", 64}));
}

TEST_F(ReadNetnsTest, ReturnsRoutesButNotTheKernelsPrefixRoutes) {
  auto snap = ReadNetns(pod());
  ASSERT_OK(snap);
  EXPECT_THAT(snap->routes,
              ::testing::UnorderedElementsAre(
                  Route{AF_INET, "", "10.88.0.1", kPodIf, "", RT_SCOPE_UNIVERSE},
                  Route{AF_INET, "192.168.50.0/24", "10.88.0.1", kPodIf, "10.88.0.5", RT_SCOPE_UNIVERSE},
                  Route{AF_INET6, "", "2001:db8::1", kPodIf, "", RT_SCOPE_UNIVERSE}));
}

TEST_F(ReadNetnsTest, LeavesOutOurTap) {
  auto tap = TapRedirect::Create(pod(), kPodIf, "tap_cap0");
  ASSERT_OK(tap);
  auto snap = ReadNetns(pod());
  ASSERT_OK(snap);
  ASSERT_EQ(snap->interfaces.size(), 1u);
  EXPECT_EQ(snap->interfaces[0].name, kPodIf);
  ASSERT_OK(tap->Remove());
}

TEST_F(ReadNetnsTest, LeavesOutLinksThatAreDownOrNotEthernet) {
  // A down link stands for the fallback tunnels (tunl0, gretap0, ...) the
  // kernel adds to every netns when those modules are loaded; a tun in
  // IFF_TUN mode has no MAC at all.
  ASSERT_NO_FATAL_FAILURE(testing::IpIn(pod(), {"link", "add", "down0", "type", "veth", "peer", "name", "down1"}));
  ASSERT_NO_FATAL_FAILURE(testing::IpIn(pod(), {"tuntap", "add", "dev", "l3tun0", "mode", "tun"}));
  ASSERT_NO_FATAL_FAILURE(testing::IpIn(pod(), {"link", "set", "l3tun0", "up"}));
  auto snap = ReadNetns(pod());
  ASSERT_OK(snap);
  ASSERT_EQ(snap->interfaces.size(), 1u);
  EXPECT_EQ(snap->interfaces[0].name, kPodIf);
}

TEST_F(ReadNetnsTest, MissingNetnsNamesThePath) {
  const std::string missing = pod() + "-missing";
  auto snap = ReadNetns(missing);
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), Code::kNotFound);
  EXPECT_THAT(snap.status().message(), HasSubstr(missing));
}

}  // namespace
}  // namespace capsule::network
