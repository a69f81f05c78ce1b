// The network RPCs through capsule-agent's gRPC API: the agent is spawned
// from this test program and so shares its private network namespace
// (netns_main.cc), where the test made veth links.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/agent/net/netns_links.h"
#include "tests/agent/server/agent_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::net {
namespace {

using agent::testing::AgentUnderTest;
using agent::testing::Ctx;
using testing::Ip;
using testing::VethPair;

class NetworkRpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::InPrivateNetns()) return;
    auto a = AgentUnderTest::Start();
    ASSERT_OK(a);
    agent_ = std::move(a).value();
  }
  static void TearDownTestSuite() { agent_.reset(); }
  void SetUp() override {
    if (!testing::InPrivateNetns()) GTEST_SKIP() << "needs root (runs in a private network namespace)";
    ASSERT_NE(agent_, nullptr);
  }
  v1::Agent::Stub& stub() { return agent_->stub(); }
  static inline std::unique_ptr<AgentUnderTest> agent_;  // one agent for the suite
};

TEST_F(NetworkRpcTest, UpdateInterfaceByMacThenListShowsIt) {
  VethPair veth("rpc-b0", "rpc-a0");  // deleting rpc-b0 takes the renamed peer along
  Ip({"link", "set", "rpc-a0", "address", "02:00:00:00:01:01"});
  v1::UpdateInterfaceRequest req;
  v1::Interface* i = req.mutable_interface();
  i->set_name("rpc-g0");  // the pod's name for it: the guest's link is renamed
  i->set_device_hint("02:00:00:00:01:01");
  i->set_mtu(1450);
  i->set_up(true);
  auto* a = i->add_addresses();
  a->set_address("10.60.0.2");
  a->set_prefix_len(24);
  v1::Interface got;
  grpc::Status st = stub().UpdateInterface(Ctx().get(), req, &got);
  ASSERT_OK(st) << st.error_message();
  EXPECT_EQ(got.name(), "rpc-g0");
  EXPECT_EQ(got.mtu(), 1450u);
  EXPECT_TRUE(got.up());
  ASSERT_GE(got.addresses_size(), 1);
  v1::Interfaces list;
  ASSERT_OK(stub().ListInterfaces(Ctx().get(), v1::ListInterfacesRequest(), &list));
  auto it = std::find_if(list.interfaces().begin(), list.interfaces().end(),
                         [](const v1::Interface& x) { return x.name() == "rpc-g0"; });
  ASSERT_NE(it, list.interfaces().end());
  EXPECT_EQ(it->hw_addr(), "02:00:00:00:01:01");
  EXPECT_TRUE(std::any_of(list.interfaces().begin(), list.interfaces().end(),
                          [](const v1::Interface& x) { return x.name() == "lo"; }));
}

TEST_F(NetworkRpcTest, UpdateRoutesThenListRoutes) {
  VethPair veth("rpc-a1", "rpc-b1");
  Ip({"addr", "add", "10.61.0.2/24", "dev", "rpc-a1"});
  Ip({"link", "set", "rpc-a1", "up"});
  Ip({"link", "set", "rpc-b1", "up"});
  v1::UpdateRoutesRequest req;
  v1::Route* def = req.mutable_routes()->add_routes();
  def->set_gateway("10.61.0.1");
  def->set_device("rpc-a1");
  v1::Routes got;
  grpc::Status st = stub().UpdateRoutes(Ctx().get(), req, &got);
  ASSERT_OK(st) << st.error_message();
  v1::Routes listed;
  ASSERT_OK(stub().ListRoutes(Ctx().get(), v1::ListRoutesRequest(), &listed));
  auto is_default = [](const v1::Route& r) { return r.dest().empty() && r.gateway() == "10.61.0.1"; };
  EXPECT_TRUE(std::any_of(got.routes().begin(), got.routes().end(), is_default));
  EXPECT_TRUE(std::any_of(listed.routes().begin(), listed.routes().end(), is_default));
  ASSERT_OK(stub().UpdateRoutes(Ctx().get(), v1::UpdateRoutesRequest(), &got));
  EXPECT_FALSE(std::any_of(got.routes().begin(), got.routes().end(), is_default));
}

TEST_F(NetworkRpcTest, BadRequestsAreInvalidArgumentNamingTheField) {
  v1::UpdateInterfaceRequest no_iface;
  v1::Interface out;
  grpc::Status st = stub().UpdateInterface(Ctx().get(), no_iface, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("interface is required"), std::string::npos) << st.error_message();
  v1::UpdateInterfaceRequest bad_addr;
  bad_addr.mutable_interface()->set_name("lo");
  bad_addr.mutable_interface()->add_addresses()->set_address("300.1.1.1");
  st = stub().UpdateInterface(Ctx().get(), bad_addr, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("interface.addresses[0].address"), std::string::npos) << st.error_message();
  v1::UpdateRoutesRequest bad_route;
  bad_route.mutable_routes()->add_routes()->set_dest("10.0.0.0/8");
  v1::Routes routes;
  st = stub().UpdateRoutes(Ctx().get(), bad_route, &routes);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("routes[0].device is required"), std::string::npos) << st.error_message();
  // Still serving.
  v1::Interfaces list;
  EXPECT_OK(stub().ListInterfaces(Ctx().get(), v1::ListInterfacesRequest(), &list));
}

}  // namespace
}  // namespace capsule::agent::net
