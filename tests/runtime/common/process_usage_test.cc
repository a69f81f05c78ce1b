#include "runtime/common/process_usage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace capsule {
namespace {

TEST(ProcessUsageTest, OurOwnMemoryAndCpuAreSeen) {
  std::vector<char> touched(64 << 20, 1);  // 64 MiB resident
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < end) spin = spin + touched[spin % touched.size()];
  auto u = ProcessUsage(::getpid());
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_GE(u->rss_bytes, 64u << 20);
  EXPECT_GT(u->cpu_seconds, 0.1);
}

TEST(ProcessUsageTest, AGoneProcessIsNotFound) {
  EXPECT_EQ(ProcessUsage(0x3ffffff0).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace capsule
