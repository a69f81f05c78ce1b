// Benchmark (label bench): CreateContainer + StartContainer to the first
// byte of ReadStdout through gRPC, over 10 busybox `echo` containers (run 0
// warms caches and is dropped), against capsule-agent as a host process
// (container_api_bench) or as PID 1 of a TCG pod VM over vsock
// (container_api_vm_bench: built with CAPSULE_BENCH_VM). Prints the median
// and the split, and a trivial call's round trip; asserts nothing about speed.
// StartBehindItsOutputLongPolls times StartContainer with the container's
// output long-polls sent before it and after it (the shim's order).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

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

// StartContainer when the container's output long-polls (ReadStdout,
// ReadStderr) went out between its create and its start, as the shim sent
// them until it attached the init's stdio at start, against the shim's
// order now (start, then the long-polls), alternately over kRuns containers
// each, beside the two calls a pod always has parked (the holder's
// WaitProcess, GetOOMEvent). A Version call right after each start shows
// whether the transport is what is slow. Prints medians and maxima.
TEST(ContainerApiBench, StartBehindItsOutputLongPolls) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  constexpr int kRuns = 16;
  constexpr auto kParked = std::chrono::milliseconds(600000);
#ifdef CAPSULE_BENCH_VM
  auto ep = StartVmEndpoint();
#else
  auto ep = StartHostEndpoint();
#endif
  ASSERT_OK(ep);
  ApiClient api(**ep);
  ASSERT_OK(api.CreateSandbox("polls"));
  ASSERT_OK(api.Create("holder", api.Spec({"sleep", "1000"})));
  ASSERT_OK(api.Start("holder"));
  auto holder_wait = std::async(std::launch::async, [&] { return api.Wait("holder", "", kParked); });
  auto oom = std::async(std::launch::async, [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kParked);
    v1::OOMEvent e;
    return api.stub().GetOOMEvent(&ctx, v1::GetOOMEventRequest(), &e);
  });
  // The process writes only once its stdin closes, after the start.
  const auto spec = api.Spec({"sh", "-c", "read x; echo out; echo err >&2"});
  std::vector<double> start[2], version[2];  // [0]: polls after the start, [1]: before it
  for (int i = 0; i < 2 * kRuns + 2; ++i) {
    const int before = i % 2;
    const std::string id = "c" + std::to_string(i);
    ASSERT_OK(api.Create(id, spec));
    std::future<Result<std::string>> out, err;
    auto polls = [&] {
      out = std::async(std::launch::async, [&] { return api.ReadAll(id, "", false); });
      err = std::async(std::launch::async, [&] { return api.ReadAll(id, "", true); });
    };
    if (before) {
      polls();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));  // containerd's start comes a few ms later
    }
    auto t0 = Clock::now();
    ASSERT_OK(api.Start(id));
    const double start_ms = Ms(Clock::now() - t0);
    if (!before) polls();
    grpc::ClientContext vctx;
    v1::VersionResponse vresp;
    t0 = Clock::now();
    ASSERT_TRUE(api.stub().Version(&vctx, v1::VersionRequest(), &vresp).ok());
    const double version_ms = Ms(Clock::now() - t0);
    ASSERT_OK(api.CloseStdin(id));
    auto o = out.get();
    auto e = err.get();
    ASSERT_OK(o);
    ASSERT_OK(e);
    EXPECT_EQ(*o, "out\n");
    EXPECT_EQ(*e, "err\n");
    ASSERT_OK(api.Wait(id));
    ASSERT_OK(api.Remove(id));
    if (i < 2) continue;  // one warm-up of each
    start[before].push_back(start_ms);
    version[before].push_back(version_ms);
  }
  ASSERT_OK(api.Signal("holder", "", SIGKILL));
  ASSERT_OK(holder_wait.get());
  EXPECT_OK(api.DestroySandbox());
  oom.wait();  // the sandbox's end answers it
  auto max = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  std::printf("container_api_bench (%s agent): StartContainer over %d containers each (ms)\n", (*ep)->name().c_str(),
              kRuns);
  for (int before : {1, 0}) {
    std::printf("  output long-polls %s the start: StartContainer median %.1f, max %.1f; a Version call after it "
                "median %.1f, max %.1f\n",
                before ? "before" : "after ", Median(start[before]), max(start[before]), Median(version[before]),
                max(version[before]));
  }
}

}  // namespace
}  // namespace capsule::agent::testing
