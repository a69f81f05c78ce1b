// Interface and route checks of agent/net, and the sysfs counter reader
// over a fake /sys/class/net tree.
#include <gtest/gtest.h>

#include "agent/net/link_stats.h"
#include "agent/net/validate.h"
#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::net {
namespace {

TEST(NetValidateTest, MacsAreNormalisedOrRefused) {
  EXPECT_EQ(NormalizeMac("hw_addr", "AA:bb:0C:dd:ee:FF").value_or(""), "aa:bb:0c:dd:ee:ff");
  for (const char* bad : {"", "aa:bb:cc:dd:ee", "aa-bb-cc-dd-ee-ff", "gg:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee:ff:00"}) {
    auto r = NormalizeMac("interface.hw_addr", bad);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("interface.hw_addr"), std::string::npos);
  }
}

TEST(NetValidateTest, InterfaceErrorsNameTheField) {
  Interface ok{"eth0", "", 1500, {{AF_INET, "10.0.0.2", 24}, {AF_INET6, "fd00::2", 64}}, true, ""};
  EXPECT_OK(ValidateInterface(ok));
  Interface nameless;
  EXPECT_NE(ValidateInterface(nameless).message().find("name, device_hint or hw_addr"), std::string::npos);
  Interface long_name = ok;
  long_name.name = "a-very-long-interface";
  EXPECT_NE(ValidateInterface(long_name).message().find("interface.name"), std::string::npos);
  Interface mtu = ok;
  mtu.mtu = 20;
  EXPECT_NE(ValidateInterface(mtu).message().find("interface.mtu 20"), std::string::npos);
  Interface addr = ok;
  addr.addresses[1].address = "10.0.0.3";  // IPv4 text with family V6
  EXPECT_NE(ValidateInterface(addr).message().find("interface.addresses[1].address"), std::string::npos);
  Interface prefix = ok;
  prefix.addresses[0].prefix_len = 33;
  EXPECT_NE(ValidateInterface(prefix).message().find("interface.addresses[0].prefix_len 33"), std::string::npos);
  Interface hint;
  hint.device_hint = "02:00:00:00:00:zz";
  EXPECT_NE(ValidateInterface(hint).message().find("interface.device_hint"), std::string::npos);
}

TEST(NetValidateTest, RouteErrorsNameTheField) {
  Route def{"", "10.0.0.1", "eth0", "", kScopeUniverse, AF_INET};
  EXPECT_OK(ValidateRoute("routes[0]", def));
  EXPECT_EQ(DescribeRoute(def), "default via 10.0.0.1 dev eth0");
  Route onlink{"10.1.0.0/16", "", "eth0", "10.0.0.2", kScopeLink, AF_INET};
  EXPECT_OK(ValidateRoute("routes[1]", onlink));
  EXPECT_EQ(DescribeRoute(onlink), "10.1.0.0/16 dev eth0 src 10.0.0.2");
  Route no_dev = def;
  no_dev.device = "";
  EXPECT_NE(ValidateRoute("routes[2]", no_dev).message().find("routes[2].device is required"), std::string::npos);
  Route bad_dest = onlink;
  bad_dest.dest = "10.1.0.0/40";
  EXPECT_NE(ValidateRoute("routes[3]", bad_dest).message().find("routes[3].dest"), std::string::npos);
  Route no_prefix = onlink;
  no_prefix.dest = "10.1.0.0";
  EXPECT_NE(ValidateRoute("routes[4]", no_prefix).message().find("not a CIDR"), std::string::npos);
  Route v6gw = def;
  v6gw.family = AF_INET6;  // gateway is IPv4 text
  EXPECT_NE(ValidateRoute("routes[5]", v6gw).message().find("routes[5].gateway"), std::string::npos);
  Route link_gw = def;
  link_gw.scope = kScopeLink;
  EXPECT_NE(ValidateRoute("routes[6]", link_gw).message().find("scope link"), std::string::npos);
}

TEST(LinkStatsTest, ReadsEveryInterfaceButLoopbackSortedByName) {
  auto dir = TempDir::Create("sysnet");
  ASSERT_OK(dir);
  for (const char* name : {"lo", "eth1", "eth0"}) {
    const std::string stats = dir->Join(std::string(name) + "/statistics");
    ASSERT_OK(MkdirAll(stats));
    ASSERT_OK(WriteFile(stats + "/rx_bytes", std::string(name) == "eth0" ? "1234\n" : "7\n"));
    ASSERT_OK(WriteFile(stats + "/tx_packets", "5\n"));
  }
  auto stats = ReadInterfaceStats(dir->path());
  ASSERT_OK(stats);
  ASSERT_EQ(stats->size(), 2u);
  EXPECT_EQ((*stats)[0].name, "eth0");
  EXPECT_EQ((*stats)[0].rx_bytes, 1234u);
  EXPECT_EQ((*stats)[0].tx_packets, 5u);
  EXPECT_EQ((*stats)[0].rx_dropped, 0u);  // missing counter reads 0
  EXPECT_EQ((*stats)[1].name, "eth1");
  EXPECT_EQ(ReadInterfaceStats(dir->Join("nope")).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace capsule::agent::net
