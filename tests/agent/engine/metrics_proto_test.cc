// CgroupMetrics -> io.containerd.cgroups.v2.Metrics field mapping.
#include "agent/engine/metrics_proto.h"

#include <gtest/gtest.h>

#include "agent/engine/cgroup_stats.h"

namespace capsule::engine {
namespace {

TEST(MetricsProtoTest, CopiesEverySection) {
  CgroupMetrics m;
  m.pids = CgroupMetrics::Pids{3, 64};
  m.cpu = CgroupMetrics::Cpu{1000, 600, 400, 10, 2, 50};
  CgroupMetrics::Memory mem;
  mem.usage = 4096;
  mem.usage_limit = UINT64_MAX;
  mem.stat = ParseFlatKeyed("anon 100\nfile 200\npgfault 7\nworkingset_refault_anon 1\nworkingset_refault_file 2\n");
  m.memory = mem;
  m.memory_events = CgroupMetrics::MemoryEvents{0, 0, 5, 2, 1};
  m.io = ParseIoStat("8:0 rbytes=10 wbytes=20 rios=1 wios=2\n");
  io::containerd::cgroups::v2::Metrics out;
  ToProto(m, &out);
  EXPECT_EQ(out.pids().current(), 3u);
  EXPECT_EQ(out.pids().limit(), 64u);
  EXPECT_EQ(out.cpu().usage_usec(), 1000u);
  EXPECT_EQ(out.cpu().throttled_usec(), 50u);
  EXPECT_EQ(out.memory().usage(), 4096u);
  EXPECT_EQ(out.memory().usage_limit(), UINT64_MAX);
  EXPECT_EQ(out.memory().anon(), 100u);
  EXPECT_EQ(out.memory().file(), 200u);
  EXPECT_EQ(out.memory().pgfault(), 7u);
  EXPECT_EQ(out.memory().workingset_refault(), 3u);
  EXPECT_EQ(out.memory_events().oom_kill(), 1u);
  ASSERT_EQ(out.io().usage_size(), 1);
  EXPECT_EQ(out.io().usage(0).wbytes(), 20u);
}

TEST(MetricsProtoTest, AbsentSectionsStayUnset) {
  CgroupMetrics m;
  m.cpu = CgroupMetrics::Cpu{};
  io::containerd::cgroups::v2::Metrics out;
  ToProto(m, &out);
  EXPECT_TRUE(out.has_cpu());
  EXPECT_FALSE(out.has_memory());
  EXPECT_FALSE(out.has_pids());
  EXPECT_FALSE(out.has_memory_events());
}

}  // namespace
}  // namespace capsule::engine
