// Benchmark (label bench): time from CreateContainer to the first byte of
// output, split into create / start / first output, over 10 busybox `echo`
// containers with the full default spec (mounts, masks, caps). Prints the
// median; asserts nothing about speed.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "tests/agent/engine/engine_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

TEST_F(EngineTest, CreateStartToFirstOutput) {
  constexpr int kRuns = 10;
  std::vector<double> create, start, first, total;
  const oci::Spec spec = Parse(DefaultSpec({"echo", "hi"}));
  for (int i = 0; i < kRuns + 1; ++i) {  // run 0 warms caches and is dropped
    const std::string id = "bench" + std::to_string(i);
    auto t0 = Clock::now();
    auto c = sandbox_->Create(id, spec, {});
    ASSERT_OK(c);
    auto t1 = Clock::now();
    ASSERT_TRUE((*c)->Start().ok());
    auto t2 = Clock::now();
    auto r = (*(*c)->Io(""))->Read(Stream::kStdout, 16);
    auto t3 = Clock::now();
    ASSERT_OK(r);
    EXPECT_EQ(r->data.substr(0, 1), "h");
    ASSERT_TRUE((*c)->Wait("").ok());
    ASSERT_OK(sandbox_->Remove(id, 10s));
    if (i == 0) continue;
    create.push_back(Ms(t1 - t0));
    start.push_back(Ms(t2 - t1));
    first.push_back(Ms(t3 - t2));
    total.push_back(Ms(t3 - t0));
  }
  std::printf("engine_bench: Create+Start to first output over %d runs: median %.2f ms (create %.2f, start %.2f, "
              "first byte %.2f); min %.2f, max %.2f\n",
              kRuns, Median(total), Median(create), Median(start), Median(first),
              *std::min_element(total.begin(), total.end()), *std::max_element(total.begin(), total.end()));
}

}  // namespace
}  // namespace capsule::engine::testing
