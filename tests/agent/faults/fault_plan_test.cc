// capsule.fault's grammar: RPC:hang | RPC:delay=MS, then :once and/or
// :skip=N, comma separated; a wrong rule is refused naming it.
#include "agent/faults/fault_plan.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

namespace capsule::agent::faults {
namespace {

using std::chrono::milliseconds;

TEST(FaultPlan, ParsesHangDelayAndOnce) {
  auto plan = FaultPlan::Parse("CreateContainer:hang,StartContainer:delay=4000:once");
  ASSERT_OK(plan);
  EXPECT_EQ(plan->ToString(), "CreateContainer:hang,StartContainer:delay=4000:once");
  auto hang = plan->Take("CreateContainer");
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->action, FaultRule::Action::kHang);
  EXPECT_FALSE(hang->once);
  EXPECT_TRUE(plan->Take("CreateContainer")) << "a rule without once applies to every call";
  auto delay = plan->Take("StartContainer");
  ASSERT_TRUE(delay);
  EXPECT_EQ(delay->action, FaultRule::Action::kDelay);
  EXPECT_EQ(delay->delay, milliseconds(4000));
  EXPECT_FALSE(plan->Take("StartContainer")) << "once: only the first call";
  EXPECT_FALSE(plan->Take("Check"));
}

TEST(FaultPlan, TwoOnceRulesOfOneRpcApplyToItsFirstTwoCalls) {
  auto plan = FaultPlan::Parse("Version:delay=10:once,Version:hang:once");
  ASSERT_OK(plan);
  EXPECT_EQ(plan->Take("Version")->action, FaultRule::Action::kDelay);
  EXPECT_EQ(plan->Take("Version")->action, FaultRule::Action::kHang);
  EXPECT_FALSE(plan->Take("Version"));
}

// A pod's own sandbox container goes through CreateContainer first: skip=1
// lets it through and holds the pod's first app container.
TEST(FaultPlan, SkipLetsTheFirstCallsThrough) {
  auto plan = FaultPlan::Parse("CreateContainer:hang:skip=1,StartContainer:delay=5:skip=2:once");
  ASSERT_OK(plan);
  EXPECT_EQ(plan->ToString(), "CreateContainer:hang:skip=1,StartContainer:delay=5:once:skip=2");
  EXPECT_FALSE(plan->Take("CreateContainer"));
  EXPECT_TRUE(plan->Take("CreateContainer"));
  EXPECT_TRUE(plan->Take("CreateContainer"));
  EXPECT_FALSE(plan->Take("StartContainer"));
  EXPECT_FALSE(plan->Take("StartContainer"));
  EXPECT_TRUE(plan->Take("StartContainer"));
  EXPECT_FALSE(plan->Take("StartContainer"));
}

TEST(FaultPlan, EmptySpecArmsNothing) {
  auto plan = FaultPlan::Parse("");
  ASSERT_OK(plan);
  EXPECT_TRUE(plan->empty());
}

TEST(FaultPlan, BadRulesAreRefusedNamingThem) {
  for (const char* spec : {"CreateContainer", "CreateContainer:explode", "createContainer:hang",
                           "StartContainer:delay=", "StartContainer:delay=0", "StartContainer:delay=x1",
                           "StartContainer:delay=3600001", "Check:hang:twice", "Check:hang:once:more", "Check:hang:once:once", "Check:hang:skip=",
                           "Check:hang:skip=-1", "Check:hang:skip=1:skip=2", "Check:hang:once:skip=1:x",
                           "Check:hang,,Version:hang", "Create/Container:hang"}) {
    auto plan = FaultPlan::Parse(spec);
    ASSERT_FALSE(plan.ok()) << spec;
    EXPECT_EQ(plan.status().code(), Code::kInvalidArgument) << spec;
    EXPECT_NE(plan.status().message().find("capsule.fault rule"), std::string::npos) << plan.status().message();
  }
}

}  // namespace
}  // namespace capsule::agent::faults
