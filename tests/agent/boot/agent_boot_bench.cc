// Boot-to-ready benchmark (ctest -L bench): boots the image N times (default
// 3, CAPSULE_BOOT_RUNS) and prints the median of (a) the agent's own
// "ready N s after kernel start" (guest CLOCK_BOOTTIME) and (b) host wall
// time from QEMU's start to the ready line on the console.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <regex>

#include "runtime/common/guest_abi.h"
#include "tests/agent/boot/qemu_guest.h"

namespace capsule::agent::testing {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

TEST(AgentBootBench, BootToReady) {
  const char* runs_env = std::getenv("CAPSULE_BOOT_RUNS");
  int runs = runs_env ? std::atoi(runs_env) : 3;
  const char* extra = std::getenv("CAPSULE_BOOT_APPEND");
  std::vector<double> guest_s, host_s;
  for (int i = 0; i < runs; ++i) {
    GuestBootOptions options;
    options.extra_append = extra ? extra : "";
    auto guest = QemuGuest::Boot(options);
    ASSERT_TRUE(guest.ok()) << guest.status().ToString();
    auto ready = (*guest)->WaitForLine(guest_abi::kAgentReadyMarker, std::chrono::milliseconds(180000));
    ASSERT_TRUE(ready.ok()) << ready.status().ToString();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*ready, m, std::regex(R"(\(([0-9.]+) s after kernel start\))"))) << *ready;
    guest_s.push_back(std::stod(m[1]));
    host_s.push_back((*guest)->ArrivalOf(guest_abi::kAgentReadyMarker)->count() / 1000.0);
    std::cout << "run " << i + 1 << ": guest " << guest_s.back() << " s, host " << host_s.back() << " s\n";
    ASSERT_TRUE((*guest)->SendCtrlAltDel().ok());
    ASSERT_TRUE((*guest)->WaitExit(std::chrono::milliseconds(60000)).ok());
  }
  std::cout << "boot to agent ready, median of " << runs << ": guest (CLOCK_BOOTTIME) " << Median(guest_s)
            << " s, host wall (QEMU start -> console line) " << Median(host_s) << " s\n";
}

}  // namespace
}  // namespace capsule::agent::testing
