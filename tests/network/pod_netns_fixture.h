// A pod's network as CNI's bridge plugin leaves it: a "pod" netns holding
// eth0 (one end of a veth pair, with addresses and routes), and a "host"
// netns holding the other end (vhost0), standing in for the bridge. Both
// live under a temp dir and are checked for leaks when the test ends.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>

#include "runtime/common/file_util.h"
#include "tests/network/test_netns.h"
#include "tests/support/status_matchers.h"

namespace capsule::network::testing {

inline constexpr const char* kPodIf = "eth0";
inline constexpr const char* kHostIf = "vhost0";
inline constexpr const char* kPodMac = "02:42:0a:58:00:05";
inline constexpr uint32_t kPodMtu = 1400;

class PodNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (netns, veth, tc)";
    auto dir = TempDir::Create("capsule-net-test");
    ASSERT_OK(dir);
    dir_.emplace(std::move(*dir));
    auto host = TestNetns::Create(dir_->Join("host"));
    ASSERT_OK(host);
    host_.emplace(std::move(*host));
    auto pod = TestNetns::Create(dir_->Join("pod"));
    ASSERT_OK(pod);
    pod_.emplace(std::move(*pod));
    ASSERT_NO_FATAL_FAILURE(MakePodNetwork());
  }

  void TearDown() override {
    if (!dir_) return;
    const std::string dir = dir_->path();
    pod_.reset();
    host_.reset();
    EXPECT_FALSE(HasMountsUnder(dir)) << "a netns mount under " << dir << " leaked";
    dir_.reset();
  }

  const std::string& pod() const { return pod_->path(); }
  const std::string& host() const { return host_->path(); }
  void DestroyPodNetns() { pod_->Destroy(); }

 private:
  void MakePodNetwork() {
    ASSERT_NO_FATAL_FAILURE(IpIn(host(), {"link", "add", kHostIf, "mtu", std::to_string(kPodMtu), "type", "veth",
                                          "peer", "name", kPodIf, "netns", pod()}));
    ASSERT_NO_FATAL_FAILURE(IpIn(host(), {"link", "set", kHostIf, "up"}));
    ASSERT_NO_FATAL_FAILURE(IpIn(pod(), {"link", "set", "lo", "up"}));
    ASSERT_NO_FATAL_FAILURE(
        IpIn(pod(), {"link", "set", kPodIf, "address", kPodMac, "mtu", std::to_string(kPodMtu), "up"}));
    ASSERT_NO_FATAL_FAILURE(IpIn(pod(), {"addr", "add", "10.88.0.5/16", "dev", kPodIf}));
    ASSERT_NO_FATAL_FAILURE(IpIn(pod(), {"addr", "add", "2001:db8::5/64", "dev", kPodIf, "nodad"}));
    ASSERT_NO_FATAL_FAILURE(IpIn(pod(), {"route", "add", "default", "via", "10.88.0.1", "dev", kPodIf}));
    ASSERT_NO_FATAL_FAILURE(
        IpIn(pod(), {"route", "add", "192.168.50.0/24", "via", "10.88.0.1", "dev", kPodIf, "src", "10.88.0.5"}));
    ASSERT_NO_FATAL_FAILURE(IpIn(pod(), {"-6", "route", "add", "default", "via", "2001:db8::1", "dev", kPodIf}));
  }

  std::optional<TempDir> dir_;
  std::optional<TestNetns> host_;
  std::optional<TestNetns> pod_;
};

}  // namespace capsule::network::testing
