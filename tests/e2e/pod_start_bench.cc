// Pod start latency through CRI on one containerd 1.6: RunPodSandbox ->
// CreateContainer -> StartContainer of a busybox container in a pod on a
// CNI bridge network, for (a) runc, (b) Capsule cold (a microVM boot per
// pod; runtime handler capsule-cold, pool.size 0) and (c) Capsule warm (a
// VM claimed from capsule-poold; handler capsule), first one pod after
// another (the pool refilled before each warm pod), then CONCURRENCY pods at
// once (warm: with the pool filled to CONCURRENCY first). gVisor (runsc as
// the runc shim's BinaryName) is measured when Debian's runsc is installed
// and runs a CNI pod here, else the reason it was skipped is printed.
// Prints p50/p90/p99/max per variant, the ratios warm/runc and cold/warm,
// the warm path's breakdown from the shim's log, the memory of an idle
// pooled VM, and writes the samples to build/bench/pod_start.csv (plus a
// CDF as PNG when gnuplot is installed). Asserts only that every pod
// started. `make bench` runs it; CAPSULE_BENCH_RUNS (default 20) and
// CAPSULE_BENCH_CONCURRENCY (default 10) size it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/command.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/images/test_images.h"
#include "tests/support/pool_daemon.h"

namespace capsule::testing {
namespace {

using std::chrono::milliseconds;
namespace v1 = ::runtime::v1;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::max(1, std::atoi(v)) : fallback;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

std::string Summary(const std::vector<double>& v) {
  if (v.empty()) return "no samples";
  return fmt::format("p50 {:8.1f}  p90 {:8.1f}  p99 {:8.1f}  max {:8.1f} ms  (n={})", Percentile(v, 0.5),
                     Percentile(v, 0.9), Percentile(v, 0.99), Percentile(v, 1.0), v.size());
}

struct Sample {
  std::string variant;  // runc, capsule-cold, capsule-warm, gvisor
  std::string mode;     // sequential, concurrent
  double ms = 0;
};

class PodStartBench : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CAPSULE_SHIM_HAS_VM) GTEST_SKIP() << "the shim was built without runtime/vm";
    auto env = E2eEnv::Create();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    env_.emplace(std::move(*env));
    // capsule-cold: the same config with the pool off.
    cold_config_ = env_->dir() + "/capsule-cold.yaml";
    auto yaml = ReadFile(env_->config_path());
    ASSERT_TRUE(yaml.ok());
    std::string cold = std::regex_replace(*yaml, std::regex("pool:\n  size: 1"), "pool:\n  size: 0");
    ASSERT_TRUE(WriteFile(cold_config_, cold).ok());
    ContainerdOptions o;
    o.path_prepend = {E2eEnv::ShimDir()};
    o.cri.emplace();
    o.cri->cni = true;
    o.cri->runtimes = {{"capsule", kCapsuleRuntimeType, {{"ConfigPath", env_->config_path()}}},
                       {"capsule-cold", kCapsuleRuntimeType, {{"ConfigPath", cold_config_}}}};
    if (GvisorUsable()) o.cri->runtimes.push_back({"runsc", "io.containerd.runc.v2", {{"BinaryName", "/usr/bin/runsc"}}});
    auto c = ContainerdHarness::Start(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ctrd_ = std::move(*c);
    for (const char* image : {"busybox", "pause"}) {
      Status imported = ctrd_->ImportImage(TestImageTar(image));
      ASSERT_TRUE(imported.ok()) << imported.ToString();
    }
    auto client = cri::CriClient::Connect(ctrd_->grpc_address(), milliseconds(20000));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    cri_ = std::move(*client);
    cri_->set_call_timeout(milliseconds(300000));
  }
  void TearDown() override {
    if (pool_) pool_->Stop();
    cri_.reset();
    if (!ctrd_) return;
    auto leaks = env_->Leaks(ctrd_->grpc_address(), {ctrd_->dir()});
    for (auto& l : ctrd_->Leaks()) leaks.push_back(std::move(l));
    EXPECT_TRUE(leaks.empty()) << leaks.front();
    if (!leaks.empty()) env_->Reap(ctrd_->grpc_address(), {ctrd_->dir()});
  }

  bool GvisorUsable() {
    if (::access("/usr/bin/runsc", X_OK) != 0) {
      gvisor_skip_ = "/usr/bin/runsc is not installed (Debian package runsc)";
      return false;
    }
    return true;
  }

  // One pod start (timed: RunPodSandbox until the container runs); the pod
  // stays until Remove(). ms, or < 0 on failure.
  double StartPod(const std::string& handler, const std::string& name, std::string* pod_id) {
    cri::PodOptions pod;
    pod.name = name;
    pod.runtime_handler = handler;
    pod.network = v1::POD;
    const v1::PodSandboxConfig config = cri::MakePodConfig(pod);
    cri::ContainerOptions c;
    c.name = "sleeper";
    c.image = kBusyboxImage;
    c.command = {"sleep", "3600"};
    const auto t0 = std::chrono::steady_clock::now();
    auto id = cri_->RunPod(config, handler == "runc" ? "" : handler);
    EXPECT_TRUE(id.ok()) << handler << ": " << id.status().ToString();
    if (!id.ok()) return -1;
    *pod_id = *id;
    auto cid = cri_->CreateContainer(*id, config, c);
    EXPECT_TRUE(cid.ok()) << cid.status().ToString();
    Status started = cid.ok() ? cri_->StartContainer(*cid) : cid.status();
    EXPECT_TRUE(started.ok()) << started.ToString();
    return started.ok() ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()
                        : -1;
  }
  void Remove(const std::string& pod_id) {
    EXPECT_TRUE(cri_->StopPod(pod_id).ok());
    EXPECT_TRUE(cri_->RemovePod(pod_id).ok());
  }
  void Sequential(const std::string& variant, const std::string& handler, int runs, bool refill_first) {
    for (int i = 0; i < runs; ++i) {
      if (refill_first) {
        ASSERT_TRUE(pool_->WaitReady(1, milliseconds(300000), /*settled=*/true).ok());
      }
      std::string id;
      const double ms = StartPod(handler, fmt::format("{}-{}", variant, i), &id);
      if (ms >= 0) samples_.push_back({variant, "sequential", ms});
      if (!id.empty()) Remove(id);
    }
  }
  void Concurrent(const std::string& variant, const std::string& handler, int n) {
    std::vector<std::future<std::pair<double, std::string>>> starts;
    for (int i = 0; i < n; ++i) {
      starts.push_back(std::async(std::launch::async, [this, handler, variant, i] {
        std::string id;
        double ms = StartPod(handler, fmt::format("{}-c{}", variant, i), &id);
        return std::make_pair(ms, id);
      }));
    }
    std::vector<std::string> ids;
    for (auto& f : starts) {
      auto [ms, id] = f.get();
      if (ms >= 0) samples_.push_back({variant, "concurrent", ms});
      if (!id.empty()) ids.push_back(id);
    }
    for (const auto& id : ids) Remove(id);
  }
  std::vector<double> Of(const std::string& variant, const std::string& mode) const {
    std::vector<double> out;
    for (const auto& s : samples_)
      if (s.variant == variant && s.mode == mode) out.push_back(s.ms);
    return out;
  }
  // The shim's "sandbox X ready in VM Y: claimed from the pool in A ms,
  // clock+RNG B ms, CreateSandbox C ms, network D ms" lines of warm pods.
  void PrintWarmBreakdown() {
    const std::string log = ctrd_->LogTail(64 << 20);
    std::regex line(R"(claimed from the pool in ([0-9.]+) ms, clock\+RNG ([0-9.]+) ms, CreateSandbox ([0-9.]+) ms, network ([0-9.]+) ms)");
    std::vector<double> claim, fresh, create, net;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
      claim.push_back(std::stod((*it)[1]));
      fresh.push_back(std::stod((*it)[2]));
      create.push_back(std::stod((*it)[3]));
      net.push_back(std::stod((*it)[4]));
    }
    std::cout << "warm path in the shim (RunPodSandbox's share; the rest is containerd, CNI and the two container "
                 "calls):\n"
              << "  claim + adopt (pool hand-over, vm.lock, agent Check): " << Summary(claim) << "\n"
              << "  clock + RNG reseed:                                    " << Summary(fresh) << "\n"
              << "  CreateSandbox in the agent:                            " << Summary(create) << "\n"
              << "  network (tap, tc, NIC hot-plug, guest addresses):      " << Summary(net) << "\n";
  }
  void WriteCsvAndPlot() {
    const char* b = std::getenv("CAPSULE_BUILD_DIR");
    const std::string dir = std::string(b != nullptr ? b : ".") + "/bench";
    (void)MkdirAll(dir);
    std::ofstream csv(dir + "/pod_start.csv");
    csv << "variant,mode,ms\n";
    for (const auto& s : samples_) csv << s.variant << "," << s.mode << "," << s.ms << "\n";
    csv.close();
    std::cout << "samples: " << dir << "/pod_start.csv\n";
    if (::access("/usr/bin/gnuplot", X_OK) != 0) {
      std::cout << "CDF plot skipped: gnuplot is not installed (apt-get install gnuplot-nox)\n";
      return;
    }
    std::string plot = fmt::format(
        "set terminal png size 900,500\nset output '{0}/pod_start_cdf.png'\nset datafile separator ','\n"
        "set logscale x\nset xlabel 'pod start (ms, RunPodSandbox -> container running)'\nset ylabel 'fraction'\n"
        "set key bottom right\nplot ",
        dir);
    bool first = true;
    for (const char* v : {"runc", "capsule-warm", "capsule-cold", "gvisor"}) {
      for (const char* m : {"sequential", "concurrent"}) {
        auto s = Of(v, m);
        if (s.empty()) continue;
        std::sort(s.begin(), s.end());
        const std::string data = fmt::format("{}/cdf-{}-{}.dat", dir, v, m);
        std::ofstream d(data);
        for (size_t i = 0; i < s.size(); ++i) d << s[i] << "," << static_cast<double>(i + 1) / s.size() << "\n";
        plot += fmt::format("{}'{}' using 1:2 with steps title '{} {}'", first ? "" : ", ", data, v, m);
        first = false;
      }
    }
    (void)WriteFile(dir + "/pod_start_cdf.gp", plot + "\n");
    auto r = RunCommand({"/usr/bin/gnuplot", dir + "/pod_start_cdf.gp"}, milliseconds(30000));
    std::cout << (r.ok() && r->ok() ? "CDF: " + dir + "/pod_start_cdf.png\n" : "gnuplot failed\n");
  }

  std::optional<E2eEnv> env_;
  std::string cold_config_;
  std::unique_ptr<ContainerdHarness> ctrd_;
  std::unique_ptr<cri::CriClient> cri_;
  std::unique_ptr<PoolDaemonProcess> pool_;
  std::vector<Sample> samples_;
  std::string gvisor_skip_;
};

TEST_F(PodStartBench, RuncCapsuleColdCapsuleWarmAndGvisor) {
  const int runs = EnvInt("CAPSULE_BENCH_RUNS", 20);
  const int concurrency = EnvInt("CAPSULE_BENCH_CONCURRENCY", 10);
  std::cout << "pod start through CRI, containerd 1.6, CNI bridge; " << runs << " sequential pods and " << concurrency
            << " at once per variant\n";
  auto started = PoolDaemonProcess::Start(env_->config_path(), env_->pool_socket());
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  pool_ = std::move(*started);
  auto st = pool_->WaitReady(1, milliseconds(300000), true);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  std::cout << "accelerator: " << st->accelerator << "; KSM " << (st->ksm.empty() ? "absent" : st->ksm) << "\n";
  if (!st->shapes.empty()) {
    std::cout << fmt::format("pool boot of a VM: {:.0f} ms; idle pooled VM (paused): QEMU RSS {:.1f} MB\n",
                             st->shapes[0].boot_last_ms, static_cast<double>(st->shapes[0].idle_vm_rss_bytes) / 1e6);
  }

  Sequential("runc", "runc", runs, false);
  Sequential("capsule-cold", "capsule-cold", runs, false);
  Sequential("capsule-warm", "capsule", runs, true);
  if (gvisor_skip_.empty()) Sequential("gvisor", "runsc", runs, false);

  Concurrent("runc", "runc", concurrency);
  Concurrent("capsule-cold", "capsule-cold", concurrency);
  ASSERT_TRUE(pool_->client().Resize(static_cast<uint32_t>(concurrency), milliseconds(5000)).ok());
  ASSERT_TRUE(pool_->WaitReady(static_cast<uint32_t>(concurrency), milliseconds(900000), true).ok());
  Concurrent("capsule-warm", "capsule", concurrency);
  if (gvisor_skip_.empty()) Concurrent("gvisor", "runsc", concurrency);

  for (const char* mode : {"sequential", "concurrent"}) {
    std::cout << "\n" << mode << ":\n";
    for (const char* v : {"runc", "capsule-cold", "capsule-warm", "gvisor"}) {
      if (std::string(v) == "gvisor" && !gvisor_skip_.empty()) {
        std::cout << fmt::format("  {:13} skipped: {}\n", v, gvisor_skip_);
        continue;
      }
      std::cout << fmt::format("  {:13} {}\n", v, Summary(Of(v, mode)));
    }
    const double runc = Percentile(Of("runc", mode), 0.5);
    const double warm = Percentile(Of("capsule-warm", mode), 0.5);
    const double cold = Percentile(Of("capsule-cold", mode), 0.5);
    std::cout << fmt::format("  warm/runc p50 = {:.2f}\n  cold/warm p50 = {:.1f}\n", runc > 0 ? warm / runc : 0,
                             warm > 0 ? cold / warm : 0);
  }
  std::cout << "\n";
  PrintWarmBreakdown();
  WriteCsvAndPlot();
}

}  // namespace
}  // namespace capsule::testing
