// VM sizing from CRI annotations and spec limits: what the pod's author
// wrote, absurd values included, gives a VM within the config's bounds.
#include "shim/pod/vm_sizing.h"

#include <gtest/gtest.h>

#include <limits>

#include "runtime/config/config.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::pod {
namespace {

TEST(VmSizingTest, QuotaAndMemoryNearInt64MaxAreCappedNotOverflowed) {
  const std::string max = std::to_string(std::numeric_limits<int64_t>::max());
  auto limits = LimitsFromAnnotations(
      {{kAnnotationCpuQuota, max}, {kAnnotationCpuPeriod, "2"}, {kAnnotationMemory, max}});
  ASSERT_OK(limits);
  const config::GuestConfig guest;
  VmSize s = SizeVm(*limits, guest);
  EXPECT_EQ(s.vcpus, guest.max_vcpus);
  EXPECT_EQ(s.memory_mib, guest.max_memory_mib);
}

TEST(VmSizingTest, RoundsUpAPartialCpuAndMebibyte) {
  WorkloadLimits l;
  l.cpu_quota_us = 150000;
  l.cpu_period_us = 100000;
  l.memory_bytes = (64 << 20) + 1;
  const config::GuestConfig guest;
  VmSize s = SizeVm(l, guest);
  EXPECT_EQ(s.vcpus, guest.default_vcpus + 2);
  EXPECT_EQ(s.memory_mib, guest.default_memory_mib + 65);
}

TEST(VmSizingTest, ANonIntegerAnnotationIsRefusedByName) {
  auto limits = LimitsFromAnnotations({{kAnnotationMemory, "12G"}});
  ASSERT_FALSE(limits.ok());
  EXPECT_EQ(limits.status().code(), Code::kInvalidArgument);
  EXPECT_NE(limits.status().message().find(kAnnotationMemory), std::string::npos) << limits.status().ToString();
}

}  // namespace
}  // namespace capsule::shim::pod
