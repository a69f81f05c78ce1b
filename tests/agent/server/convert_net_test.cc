// proto <-> agent/net conversions keep every field, and families map to
// AF_INET/AF_INET6.
#include <gtest/gtest.h>

#include "agent/server/convert_net.h"

namespace capsule::agent::server {
namespace {

TEST(ConvertNetTest, InterfaceFromProtoKeepsEveryField) {
  v1::Interface in;
  in.set_name("eth0");
  in.set_hw_addr("02:00:00:00:00:01");
  in.set_mtu(1450);
  in.set_up(true);
  in.set_device_hint("02:00:00:00:00:02");
  auto* a = in.add_addresses();
  a->set_family(v1::IPAddress::V6);
  a->set_address("fd00::2");
  a->set_prefix_len(64);
  net::Interface out = InterfaceFromProto(in);
  EXPECT_EQ(out.name, "eth0");
  EXPECT_EQ(out.hw_addr, "02:00:00:00:00:01");
  EXPECT_EQ(out.mtu, 1450u);
  EXPECT_TRUE(out.up);
  EXPECT_EQ(out.device_hint, "02:00:00:00:00:02");
  ASSERT_EQ(out.addresses.size(), 1u);
  EXPECT_EQ(out.addresses[0], (net::IpAddress{AF_INET6, "fd00::2", 64}));
}

TEST(ConvertNetTest, InterfaceRoundTripsThroughProto) {
  net::Interface i{"eth1", "aa:bb:cc:dd:ee:ff", 9000, {{AF_INET, "10.0.0.2", 24}}, false, ""};
  net::Interface back = InterfaceFromProto(InterfaceToProto(i));
  EXPECT_EQ(back.name, i.name);
  EXPECT_EQ(back.hw_addr, i.hw_addr);
  EXPECT_EQ(back.mtu, i.mtu);
  EXPECT_EQ(back.addresses, i.addresses);
  EXPECT_FALSE(back.up);
}

TEST(ConvertNetTest, RoutesRoundTripThroughProto) {
  std::vector<net::Route> routes = {{"", "10.0.0.1", "eth0", "10.0.0.2", 0, AF_INET},
                                    {"fd00::/64", "", "eth0", "", 253, AF_INET6}};
  v1::Routes p = RoutesToProto(routes);
  ASSERT_EQ(p.routes_size(), 2);
  EXPECT_EQ(p.routes(1).family(), v1::IPAddress::V6);
  EXPECT_EQ(p.routes(1).scope(), 253u);
  EXPECT_EQ(RoutesFromProto(p), routes);
}

}  // namespace
}  // namespace capsule::agent::server
