// Huge or malformed args and env of a container's process are refused by
// the shim with the field and the size, before anything reaches the guest:
// through MakeGuestSpec (the init process) and on their own (an exec).
#include "shim/task/process_limits.h"

#include <gtest/gtest.h>

#include "shim/task/guest_spec.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::task {
namespace {

using nlohmann::json;

json ProcessJson() { return json{{"args", {"sh", "-c", "true"}}, {"env", {"PATH=/bin", "A=1"}}, {"cwd", "/"}}; }

TEST(ProcessLimitsTest, AnOrdinaryProcessAndOneWithoutArgsOrEnvPass) {
  EXPECT_OK(CheckProcessLimits(ProcessJson(), "process"));
  EXPECT_OK(CheckProcessLimits(json{{"cwd", "/"}}, "process"));
  json at_limit = ProcessJson();
  at_limit["env"][1] = std::string(kMaxProcessStringBytes - 1, 'x');  // plus its NUL
  EXPECT_OK(CheckProcessLimits(at_limit, "process"));
}

TEST(ProcessLimitsTest, OneStringOverWhatAnExecTakesIsNamedByIndex) {
  json p = ProcessJson();
  p["env"][1] = "BIG=" + std::string(kMaxProcessStringBytes, 'x');
  Status st = CheckProcessLimits(p, "process");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("process.env[1]: 131077 bytes, over the 131072"), std::string::npos) << st.message();
}

TEST(ProcessLimitsTest, ManyStringsTogetherOverArgMaxAreRefusedWithTheirSize) {
  json p = ProcessJson();
  for (int i = 0; i < 40; ++i) p["args"].push_back(std::string(64 * 1024, 'a'));
  Status st = CheckProcessLimits(p, "exec e1 of container c1: process");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("exec e1 of container c1: process: args and env take"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("over the 2097152"), std::string::npos) << st.message();
}

TEST(ProcessLimitsTest, WrongTypesAreNamed) {
  json p = ProcessJson();
  p["args"][1] = 7;
  EXPECT_NE(CheckProcessLimits(p, "process").message().find("process.args[1]: must be a string"), std::string::npos);
  p = ProcessJson();
  p["env"] = "PATH=/bin";
  EXPECT_NE(CheckProcessLimits(p, "process").message().find("process.env: must be an array of strings"),
            std::string::npos);
  EXPECT_NE(CheckProcessLimits(json::array(), "process").message().find("process: must be an object"),
            std::string::npos);
}

TEST(ProcessLimitsTest, TheGuestSpecRewriteRefusesAnOversizedInitProcess) {
  json spec = {{"root", {{"path", "rootfs"}}}, {"process", ProcessJson()}, {"mounts", json::array()}};
  spec["process"]["env"].push_back(std::string(kMaxProcessStringBytes + 1, 'y'));
  GuestSpecInput in{"c1", "c1/rootfs", [](std::string_view rel) { return "/run/capsule/shared/" + std::string(rel); }};
  auto guest = MakeGuestSpec(spec, in);
  ASSERT_FALSE(guest.ok());
  EXPECT_NE(guest.status().message().find("process.env[2]"), std::string::npos) << guest.status().message();
}

// Not a process limit, but the same entry point: a bind asking for
// bidirectional propagation is refused by name; one-way (rslave) passes.
TEST(GuestSpecMountsTest, BidirectionalPropagationIsRefusedAndHostToContainerPasses) {
  GuestSpecInput in{"c1", "c1/rootfs", [](std::string_view rel) { return "/run/capsule/shared/" + std::string(rel); }};
  auto spec_with = [](const char* propagation) {
    json m = {{"destination", "/data"}, {"type", "bind"}, {"source", "/tmp"},
              {"options", {"rbind", propagation, "rw"}}};
    return json{{"root", {{"path", "rootfs"}}}, {"process", ProcessJson()}, {"mounts", json::array({m})}};
  };
  auto refused = MakeGuestSpec(spec_with("rshared"), in);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("mounts[0] (/tmp on /data): bidirectional mount propagation ('rshared')"),
            std::string::npos)
      << refused.status().message();
  auto slave = MakeGuestSpec(spec_with("rslave"), in);
  ASSERT_OK(slave);
  ASSERT_EQ(slave->binds.size(), 1u);
  EXPECT_EQ(slave->binds[0].host_source, "/tmp");
}

}  // namespace
}  // namespace capsule::shim::task
