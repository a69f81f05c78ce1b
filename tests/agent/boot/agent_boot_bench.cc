// Boot-to-ready benchmark (ctest -L bench): boots the image N times (default
// 3, CAPSULE_BOOT_RUNS; extra kernel options in CAPSULE_BOOT_APPEND) and
// prints medians of:
//   host:  wall time from QEMU's start to the ready line on the console (the
//          number that matters; includes firmware and kernel load)
//   guest: the agent's "ready N s after kernel start" (CLOCK_BOOTTIME; under
//          TCG it misses the time before the TSC is calibrated)
//   agent: from the agent's first log line to its ready line (its own boot
//          duties: root, mounts, cgroups, 15 modules, gRPC server)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <regex>

#include "runtime/wire/guest_abi.h"
#include "tests/agent/boot/qemu_guest.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::testing {
namespace {

// Seconds of the day from a log line's "2026-01-02T03:04:05.678901Z".
double LogTime(const std::string& line) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(R"(T(\d\d):(\d\d):(\d\d\.\d+)Z)"))) return 0;
  return std::stod(m[1]) * 3600 + std::stod(m[2]) * 60 + std::stod(m[3]);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

TEST(AgentBootBench, BootToReady) {
  const char* runs_env = std::getenv("CAPSULE_BOOT_RUNS");
  int runs = runs_env ? std::atoi(runs_env) : 3;
  const char* extra = std::getenv("CAPSULE_BOOT_APPEND");
  std::vector<double> guest_s, host_s, agent_s;
  for (int i = 0; i < runs; ++i) {
    GuestBootOptions options;
    options.extra_append = extra ? extra : "";
    auto guest = QemuGuest::Boot(options);
    ASSERT_OK(guest);
    auto ready = (*guest)->WaitForLine(guest_abi::kAgentReadyMarker, std::chrono::milliseconds(180000));
    ASSERT_OK(ready);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*ready, m, std::regex(R"(\(([0-9.]+) s after kernel start\))"))) << *ready;
    guest_s.push_back(std::stod(m[1]));
    host_s.push_back((*guest)->ArrivalOf(guest_abi::kAgentReadyMarker)->count() / 1000.0);
    auto start = (*guest)->WaitForLine("starting (pid 1", std::chrono::milliseconds(1));
    ASSERT_OK(start);
    agent_s.push_back(LogTime(*ready) - LogTime(*start));
    std::cout << "run " << i + 1 << ": host " << host_s.back() << " s, guest " << guest_s.back() << " s, agent "
              << agent_s.back() << " s\n";
    ASSERT_TRUE((*guest)->SendCtrlAltDel().ok());
    ASSERT_TRUE((*guest)->WaitExit(std::chrono::milliseconds(60000)).ok());
  }
  std::cout << "boot to agent ready, median of " << runs << ": host wall (QEMU start -> ready line) "
            << Median(host_s) << " s, guest CLOCK_BOOTTIME " << Median(guest_s) << " s, agent duties "
            << Median(agent_s) << " s\n";
}

}  // namespace
}  // namespace capsule::agent::testing
