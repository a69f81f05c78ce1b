// Benchmark (label bench): CreateContainer + StartContainer to the first
// byte of ReadStdout through gRPC, over 10 busybox `echo` containers (run 0
// warms caches and is dropped), against capsule-agent as a host process
// (container_api_bench) or as PID 1 of a TCG pod VM over vsock
// (container_api_vm_bench: built with CAPSULE_BENCH_VM). Prints the median
// and the split, and a trivial call's round trip; asserts nothing about speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "tests/agent/containers/container_api_fixture.h"
#include "tests/agent/containers/host_endpoint.h"
#ifdef CAPSULE_BENCH_VM
#include "tests/agent/containers/vm_endpoint.h"
#endif

namespace capsule::agent::testing {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

TEST(ContainerApiBench, CreateStartToFirstOutputThroughGrpc) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  constexpr int kRuns = 10;
#ifdef CAPSULE_BENCH_VM
  auto ep = StartVmEndpoint();
  const char* transport = "vsock via capsule-vsockd, TCG";
#else
  auto ep = StartHostEndpoint();
  const char* transport = "unix socket";
#endif
  ASSERT_OK(ep);
  ApiClient api(**ep);
  // One guest round trip with no work in it, the unit of every other figure.
  std::vector<double> rtt;
  for (int i = 0; i < kRuns * 4 + 1; ++i) {
    grpc::ClientContext ctx;
    v1::VersionResponse resp;
    auto t0 = Clock::now();
    ASSERT_TRUE(api.stub().Version(&ctx, v1::VersionRequest(), &resp).ok());
    if (i > 0) rtt.push_back(Ms(Clock::now() - t0));
  }
  ASSERT_OK(api.CreateSandbox("bench"));
  const auto spec = api.Spec({"echo", "hi"});
  std::vector<double> create, start, first, total;
  for (int i = 0; i < kRuns + 1; ++i) {
    const std::string id = "bench" + std::to_string(i);
    auto t0 = Clock::now();
    ASSERT_OK(api.Create(id, spec));
    auto t1 = Clock::now();
    ASSERT_OK(api.Start(id));
    auto t2 = Clock::now();
    auto r = api.Read(id, "", false, 16);
    auto t3 = Clock::now();
    ASSERT_OK(r);
    EXPECT_EQ(r->data().substr(0, 1), "h");
    ASSERT_OK(api.Wait(id));
    ASSERT_OK(api.Remove(id));
    if (i == 0) continue;
    create.push_back(Ms(t1 - t0));
    start.push_back(Ms(t2 - t1));
    first.push_back(Ms(t3 - t2));
    total.push_back(Ms(t3 - t0));
  }
  std::printf("container_api_bench (%s agent, gRPC over %s): Create+Start to first output over %d runs: "
              "median %.2f ms (create %.2f, start %.2f, first byte %.2f); min %.2f, max %.2f\n",
              (*ep)->name().c_str(), transport, kRuns, Median(total), Median(create), Median(start), Median(first),
              *std::min_element(total.begin(), total.end()), *std::max_element(total.begin(), total.end()));
  std::printf("container_api_bench (%s agent): a Version call's round trip over %zu calls: median %.2f ms, max %.2f\n",
              (*ep)->name().c_str(), rtt.size(), Median(rtt), *std::max_element(rtt.begin(), rtt.end()));
  EXPECT_OK(api.DestroySandbox());
}

}  // namespace
}  // namespace capsule::agent::testing
