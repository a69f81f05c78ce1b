// The process JSON `capsule-runtime exec` sends is what the agent's own OCI
// parser accepts, with the defaults and the caller's overrides.
#include "runtime/guestexec/guest_exec_session.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/oci/spec_parser.h"

namespace capsule::guestexec {
namespace {

bool Has(const std::vector<std::string>& env, const std::string& kv) {
  return std::find(env.begin(), env.end(), kv) != env.end();
}

TEST(GuestProcessJsonTest, PipesModeHasDefaultsAndParsesAsTheAgentDoes) {
  ExecOptions o;
  o.args = {"ps", "-ef"};
  auto p = oci::ParseProcess(GuestProcessJson(o));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->args, (std::vector<std::string>{"ps", "-ef"}));
  EXPECT_EQ(p->cwd, "/");
  EXPECT_FALSE(p->terminal);
  EXPECT_FALSE(p->console_size.has_value());
  EXPECT_EQ(p->user.uid, 0u);
  EXPECT_TRUE(Has(p->env, "HOME=/root"));
  EXPECT_TRUE(std::any_of(p->env.begin(), p->env.end(), [](const std::string& e) { return e.rfind("PATH=", 0) == 0; }));
  EXPECT_FALSE(std::any_of(p->env.begin(), p->env.end(), [](const std::string& e) { return e.rfind("TERM=", 0) == 0; }));
}

TEST(GuestProcessJsonTest, TtyCarriesTermAndSizeAndTheCallersEnvOverridesDefaults) {
  ExecOptions o;
  o.args = {"sh"};
  o.tty = true;
  o.term = "screen-256color";
  o.size = WindowSize{45, 123};
  o.cwd = "/proc";
  o.env = {"PATH=/opt/bin", "EXTRA=a=b"};
  auto p = oci::ParseProcess(GuestProcessJson(o));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->terminal);
  ASSERT_TRUE(p->console_size.has_value());
  EXPECT_EQ(p->console_size->height, 45u);
  EXPECT_EQ(p->console_size->width, 123u);
  EXPECT_EQ(p->cwd, "/proc");
  EXPECT_TRUE(Has(p->env, "TERM=screen-256color"));
  EXPECT_TRUE(Has(p->env, "PATH=/opt/bin"));
  EXPECT_EQ(std::count_if(p->env.begin(), p->env.end(), [](const std::string& e) { return e.rfind("PATH=", 0) == 0; }),
            1);
  EXPECT_TRUE(Has(p->env, "EXTRA=a=b"));
}

}  // namespace
}  // namespace capsule::guestexec
