// The harness itself: it starts a private containerd that answers, passes
// config and environment through, and leaves nothing behind, even with a
// mount left under its dir or when start-up fails.
#include "tests/support/containerd_harness.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <filesystem>

namespace capsule::testing {
namespace {

using namespace std::chrono_literals;

bool ProcessIsContainerd(pid_t pid) {
  auto comm = ReadFile("/proc/" + std::to_string(pid) + "/comm");
  return comm.ok() && comm->rfind("containerd", 0) == 0;
}

TEST(ContainerdHarnessTest, StartsPrivateDaemonAndCleansUpCompletely) {
  ContainerdOptions o;
  o.env = {{"CAPSULE_HARNESS_PROBE", "yes"}};
  // An extra plugin section using @DIR@, as CRI/CNI set-ups will.
  o.extra_toml = {"[plugins.\"io.containerd.snapshotter.v1.native\"]\n  root_path = \"@DIR@/native\""};
  auto h = ContainerdHarness::Start(o);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const std::string dir = (*h)->dir();
  const pid_t pid = (*h)->pid();

  auto config = ReadFile((*h)->config_path());
  ASSERT_TRUE(config.ok());
  EXPECT_NE(config->find("root_path = \"" + dir + "/native\""), std::string::npos) << *config;
  auto environ = ReadFile("/proc/" + std::to_string(pid) + "/environ");
  ASSERT_TRUE(environ.ok());
  EXPECT_NE(environ->find(std::string("CAPSULE_HARNESS_PROBE=yes\0", 26)), std::string::npos);

  auto plugins = (*h)->Ctr({"plugins", "ls"});
  ASSERT_TRUE(plugins.ok() && plugins->ok());
  EXPECT_NE(plugins->out.find("io.containerd.grpc.v1           events"), std::string::npos);
  EXPECT_EQ(plugins->out.find(" cri "), std::string::npos) << "CRI should be disabled";
  EXPECT_TRUE(PathExists(dir + "/native"));  // the extra section took effect

  // A mount left behind by a test must not stop the clean-up.
  ASSERT_TRUE(MkdirAll(dir + "/leftover-mount").ok());
  ASSERT_EQ(::mount("tmpfs", (dir + "/leftover-mount").c_str(), "tmpfs", 0, "size=1m"), 0);

  h->reset();
  EXPECT_FALSE(PathExists(dir));
  EXPECT_FALSE(ProcessIsContainerd(pid));
}

TEST(ContainerdHarnessTest, FailedStartReportsLogAndLeavesNothing) {
  auto parent = TempDir::Create("harness-parent");
  ASSERT_TRUE(parent.ok());
  ContainerdOptions o;
  o.temp_parent = parent->path();
  o.extra_toml = {"[plugins.\"io.containerd.grpc.v1.cri\"\nthis is not toml"};
  auto h = ContainerdHarness::Start(o);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("log"), std::string::npos) << h.status().ToString();
  EXPECT_TRUE(std::filesystem::is_empty(parent->path()));
}

TEST(ContainerdHarnessTest, CtrReportsFailuresWithOutput) {
  auto h = ContainerdHarness::Start();
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  auto r = (*h)->Ctr({"-n", "nope", "containers", "info", "missing"});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE(r->err.find("not found"), std::string::npos) << r->err;
  EXPECT_TRUE((*h)->Stop().ok());
  EXPECT_TRUE((*h)->Stop().ok());  // idempotent
}

}  // namespace
}  // namespace capsule::testing
