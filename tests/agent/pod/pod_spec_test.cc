// PodSpec validation and resolv.conf generation; mounting is covered by
// agent_service_test.cc through the real agent.
#include <gtest/gtest.h>

#include "agent/pod/pod_spec.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::pod {
namespace {

PodSpec Good() {
  PodSpec s;
  s.id = "pod-1";
  s.hostname = "web-0";
  s.dns = {"10.96.0.10", "search default.svc.cluster.local svc.cluster.local", "options ndots:5"};
  s.storages = {{"virtiofs", "capsule-shared", "", {}, "/run/capsule/shared"}};
  s.kernel_modules = {"9p"};
  return s;
}

void ExpectInvalid(const PodSpec& s, std::string_view mention) {
  Status st = ValidatePodSpec(s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(mention), std::string::npos) << st.message();
}

TEST(CheckId, BoundedAndPathSafe) {
  EXPECT_OK(CheckId("container_id", "abc-1_2.x"));
  EXPECT_OK(CheckId("container_id", std::string(128, 'a')));
  for (const std::string& bad : std::vector<std::string>{"", "..", ".", "a/b", "a b", std::string(129, 'a'),
                                                         std::string("a\0b", 3)}) {
    Status st = CheckId("container_id", bad);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(st.message().rfind("container_id", 0), 0u) << st.message();
  }
}

TEST(PodSpec, GoodSpecPasses) { EXPECT_OK(ValidatePodSpec(Good())); }

TEST(PodSpec, IdRequiredAndPlain) {
  auto s = Good();
  s.id = "";
  ExpectInvalid(s, "sandbox_id");
  s.id = "a/b";
  ExpectInvalid(s, "sandbox_id");
}

TEST(PodSpec, BadHostname) {
  auto s = Good();
  s.hostname = "under_score";
  ExpectInvalid(s, "hostname");
}

TEST(PodSpec, BadStorageNamedByIndex) {
  auto s = Good();
  s.storages.push_back({"tmpfs", "", "", {}, "rel"});
  ExpectInvalid(s, "storages[1].mount_point");
}

TEST(PodSpec, BadModuleName) {
  auto s = Good();
  s.kernel_modules = {"ok", "../../x"};
  ExpectInvalid(s, "kernel_modules[1]");
}

TEST(ResolvConf, LinesAndBareAddresses) {
  auto text = ResolvConfFromDns(Good().dns);
  ASSERT_OK(text);
  EXPECT_EQ(*text,
            "nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local\noptions ndots:5\n");
  auto v6 = ResolvConfFromDns({"nameserver fd00::a"});
  ASSERT_OK(v6);
  EXPECT_EQ(*v6, "nameserver fd00::a\n");
}

TEST(ResolvConf, RejectsInjectionAndJunk) {
  EXPECT_EQ(ResolvConfFromDns({"nameserver 1.2.3.4\nnameserver 6.6.6.6"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ResolvConfFromDns({"nameserver example.com"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ResolvConfFromDns({"bogus line"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ResolvConfFromDns({"search"}).status().code(), Code::kInvalidArgument);
  auto st = ResolvConfFromDns({"1.1.1.1", ""}).status();
  EXPECT_NE(st.message().find("dns[1]"), std::string::npos);
}

}  // namespace
}  // namespace capsule::agent::pod
