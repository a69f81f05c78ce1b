// Benchmark (label bench): QEMU start-to-QMP-ready through the driver, the
// paused VMM's memory with 256 MiB memfd RAM, and stop time. Prints medians
// of kRuns; asserts nothing about speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runtime/common/file_util.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/hypervisor/vm_paths.h"
#include "tests/support/status_matchers.h"

namespace capsule::hypervisor {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRuns = 5;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// kB value of a /proc/<pid>/status field.
double StatusKb(pid_t pid, const std::string& field) {
  auto s = ReadFile("/proc/" + std::to_string(pid) + "/status");
  if (!s.ok()) return -1;
  size_t at = s->find(field + ":");
  if (at == std::string::npos) return -1;
  return std::atof(s->c_str() + at + field.size() + 1);
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

TEST(QemuBench, LaunchToQmpReadyAndPausedRss) {
  auto root = TempDir::Create("qemu-bench");
  ASSERT_OK(root);
  config::Config cfg;
  cfg.runtime.state_dir = root->path();
  QemuHypervisor hv(cfg);
  // Warm-up: pays the one-time QEMU capability probe (then cached on disk).
  auto probe_start = Clock::now();
  ASSERT_OK(hv.Capabilities());
  double probe_ms = Ms(Clock::now() - probe_start);

  std::vector<double> ready_ms, stop_ms, rss, anon, file, shmem;
  for (int i = 0; i < kRuns; ++i) {
    VmSpec s;
    s.id = "bench" + std::to_string(i);
    s.state_dir = DefaultVmStateDir(root->path(), s.id);
    s.memory_mib = 256;
    s.start_paused = true;
    auto t0 = Clock::now();
    auto vm = hv.Launch(s);
    ready_ms.push_back(Ms(Clock::now() - t0));
    ASSERT_OK(vm);
    pid_t pid = (*vm)->vmm_pid();
    rss.push_back(StatusKb(pid, "VmRSS") / 1024);
    anon.push_back(StatusKb(pid, "RssAnon") / 1024);
    file.push_back(StatusKb(pid, "RssFile") / 1024);
    shmem.push_back(StatusKb(pid, "RssShmem") / 1024);
    auto t1 = Clock::now();
    ASSERT_TRUE((*vm)->Stop(std::chrono::milliseconds(0)).ok());
    stop_ms.push_back(Ms(Clock::now() - t1));
  }
  std::printf("QEMU capability probe (once per binary, cached): %.0f ms\n", probe_ms);
  std::printf("Launch -> QMP ready (paused, 256 MiB memfd, TCG), median of %d: %.0f ms [min %.0f, max %.0f]\n", kRuns,
              Median(ready_ms), *std::min_element(ready_ms.begin(), ready_ms.end()),
              *std::max_element(ready_ms.begin(), ready_ms.end()));
  std::printf("Paused QEMU RSS, median: %.1f MiB (anon %.1f, file %.1f, shmem/guest RAM %.1f)\n", Median(rss),
              Median(anon), Median(file), Median(shmem));
  std::printf("Stop (quit -> exit -> files removed), median: %.0f ms\n", Median(stop_ms));
}

}  // namespace
}  // namespace capsule::hypervisor
