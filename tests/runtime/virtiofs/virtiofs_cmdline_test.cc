#include <gtest/gtest.h>

#include "runtime/virtiofs/virtiofs_daemon.h"

namespace capsule::virtiofs {
namespace {

TEST(VirtiofsCmdlineTest, DefaultsFromConfig) {
  config::Config c;
  c.virtiofs.cache = "none";
  EXPECT_EQ(c.virtiofs.thread_pool_size, 0u);
  VirtiofsOptions o = VirtiofsOptions::FromConfig(c, "/run/capsule/vm/p1");
  std::vector<std::string> want = {"/usr/lib/qemu/virtiofsd", "-f", "--socket-path=/run/capsule/vm/p1/virtiofsd.sock",
                                   "-o", "source=/run/capsule/vm/p1/shared", "-o", "cache=none",
                                   "-o", "sandbox=namespace", "-o", "no_xattr", "-o", "announce_submounts",
                                   "--thread-pool-size=0"};
  EXPECT_EQ(VirtiofsdCommandLine(o), want);
  c.virtiofs.thread_pool_size = 2;
  EXPECT_EQ(VirtiofsdCommandLine(VirtiofsOptions::FromConfig(c, "/run/capsule/vm/p1")).back(), "--thread-pool-size=2");
}

TEST(VirtiofsCmdlineTest, ChrootXattrThreadPool) {
  VirtiofsOptions o;
  o.vm_dir = "/v";
  o.sandbox = Sandbox::kChroot;
  o.xattr = true;
  o.announce_submounts = false;
  o.thread_pool_size = 4;
  std::vector<std::string> want = {"/usr/lib/qemu/virtiofsd", "-f", "--socket-path=/v/virtiofsd.sock",
                                   "-o", "source=/v/shared", "-o", "cache=auto", "-o", "sandbox=chroot",
                                   "-o", "xattr", "--thread-pool-size=4"};
  EXPECT_EQ(VirtiofsdCommandLine(o), want);
}

TEST(VirtiofsCmdlineTest, BadOptionsAreRejectedBeforeAnythingIsMade) {
  VirtiofsOptions o;
  o.vm_dir = "relative";
  EXPECT_EQ(VirtiofsDaemon::Start(o).status().code(), Code::kInvalidArgument);
  o.vm_dir = "/nonexistent-capsule-test/vm";
  o.cache = "sometimes";
  auto r = VirtiofsDaemon::Start(o);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("cache must be none, auto or always, got 'sometimes'"), std::string::npos);
  o.cache = "auto";
  o.daemon_path = "/nonexistent/virtiofsd";
  r = VirtiofsDaemon::Start(o);
  EXPECT_NE(r.status().message().find("/nonexistent/virtiofsd"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace capsule::virtiofs
