// Benchmark (label bench, not a pass/fail timing test): ttrpc round trips
// through capsule_ttrpc over a unix socketpair, against a bare ping-pong of
// the same bytes on a socketpair as the baseline. Prints medians of 5 runs:
// wall time per call, and process CPU time per call (less sensitive to a
// busy machine's scheduling delays, which dominate wall time on 2 cores).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "runtime/ttrpc/client.h"
#include "runtime/ttrpc/server.h"
#include "tests/runtime/ttrpc/test_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::ttrpc {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRuns = 5;
constexpr int kCallsPerRun = 2000;

double CpuMicros() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& tv) { return tv.tv_sec * 1e6 + tv.tv_usec; };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

struct Cost {
  double wall_us;
  double cpu_us;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Bare baseline: write n bytes, read n bytes back, per round trip.
Cost BaselineMicros(size_t bytes) {
  auto [a, b] = testing::SocketPair();
  std::thread echo([fd = b.get(), bytes] {
    std::vector<char> buf(bytes);
    while (true) {
      size_t got = 0;
      while (got < bytes) {
        ssize_t n = ::read(fd, buf.data() + got, bytes - got);
        if (n <= 0) return;
        got += static_cast<size_t>(n);
      }
      if (!SendAll(fd, std::string_view(buf.data(), bytes)).ok()) return;
    }
  });
  std::string msg(bytes, 'p');
  std::vector<char> buf(bytes);
  std::vector<double> runs, cpu;
  for (int r = 0; r < kRuns; ++r) {
    auto t0 = Clock::now();
    double c0 = CpuMicros();
    for (int i = 0; i < kCallsPerRun; ++i) {
      (void)SendAll(a.get(), msg);
      size_t got = 0;
      while (got < bytes) got += static_cast<size_t>(::read(a.get(), buf.data() + got, bytes - got));
    }
    runs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kCallsPerRun);
    cpu.push_back((CpuMicros() - c0) / kCallsPerRun);
  }
  ::shutdown(a.get(), SHUT_RDWR);
  echo.join();
  return {Median(runs), Median(cpu)};
}

struct Rig {
  Server server;
  ClientPtr client;
  Rig() {
    server.Register("bench", "Echo", [](const CallContext&, std::string_view p) {
      return Result<std::string>(std::string(p));
    });
    auto [a, b] = testing::SocketPair();
    EXPECT_OK(server.ServeConnection(std::move(b)));
    client = std::move(*Client::FromFd(std::move(a)));
  }
};

Cost TtrpcMicros(size_t bytes, int threads) {
  Rig rig;
  std::string msg(bytes, 'p');
  std::vector<double> runs, cpu;
  for (int r = 0; r < kRuns; ++r) {
    auto t0 = Clock::now();
    double c0 = CpuMicros();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&] {
        for (int i = 0; i < kCallsPerRun / threads; ++i) {
          if (!rig.client->CallRaw("bench", "Echo", msg, {}).ok()) std::abort();
        }
      });
    }
    for (auto& t : ts) t.join();
    runs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kCallsPerRun);
    cpu.push_back((CpuMicros() - c0) / kCallsPerRun);
  }
  return {Median(runs), Median(cpu)};
}

TEST(TtrpcBench, RoundTrips) {
  std::vector<size_t> sizes = {64, 64 * 1024};
  // TTRPC_BENCH_BYTES=N runs one payload size only (for profiling).
  if (const char* only = std::getenv("TTRPC_BENCH_BYTES")) sizes = {std::stoul(only)};
  for (size_t bytes : sizes) {
    Cost base = BaselineMicros(bytes);
    Cost one = TtrpcMicros(bytes, 1);
    Cost eight = TtrpcMicros(bytes, 8);
    std::printf("payload %6zu B, us per call (wall / cpu): bare ping-pong %.1f / %.1f | "
                "ttrpc 1 caller %.1f / %.1f | ttrpc 8 callers %.1f / %.1f\n",
                bytes, base.wall_us, base.cpu_us, one.wall_us, one.cpu_us, eight.wall_us,
                eight.cpu_us);
  }
}

}  // namespace
}  // namespace capsule::ttrpc
