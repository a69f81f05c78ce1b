// Pod start latency through CRI on one containerd 1.6: RunPodSandbox ->
// CreateContainer -> StartContainer of a busybox container in a pod on a
// CNI bridge network, for (a) runc, (b) Capsule cold (a microVM boot per
// pod; runtime handler capsule-cold, pool.size 0) and (c) Capsule warm (a
// VM claimed from capsule-poold; handler capsule), first one pod after
// another (runc and warm pods taking turns, the pool refilled and settled
// before each; then the cold pods), then CONCURRENCY pods at
// once (warm: with the pool filled to CONCURRENCY first), then CONCURRENCY
// pods at once against a pool of BURST_POOL (< CONCURRENCY) ready VMs,
// refilled by restoring clones of a template (capsule-burst-template) and
// by cold boots (capsule-burst-boot): the pods beyond the pool are served
// by the refill (a claim waits pool.claim_wait_ms for a clone under way,
// then restores one for itself) or cold-boot. gVisor (runsc as
// the runc shim's BinaryName) is measured when Debian's runsc is installed
// and runs a CNI pod here, else the reason it was skipped is printed.
// Prints p50/p90/p99/max per variant, the ratios warm/runc and cold/warm,
// the sequential pods' stop (StopPodSandbox + RemovePodSandbox) and stop
// warm/runc,
// each CRI call's share, the warm path's breakdown from the shim's log (and
// the guest's container create from the agent's, in the VM's console), the
// memory of idle pooled VMs with and without KSM, and writes the samples to build/bench/pod_start.csv (plus a
// CDF as PNG when gnuplot is installed). Asserts only that every pod
// started. `make bench` runs it; CAPSULE_BENCH_RUNS (default 20) and
// CAPSULE_BENCH_CONCURRENCY (default 10) and CAPSULE_BENCH_BURST_POOL
// (default 3) size it; PerPodOverheadForTheRuntimeClass measures what an
// idle pod costs the host (CAPSULE_BENCH_OVERHEAD_PODS, default 3), on the
// virtio-fs handler and on capsule-dense (copy-on-write clones from a pool
// of their own: each pod's own memory, the template once);
// DenseClaimThatRestoresAgainstAReadyClone compares a dense claim that finds
// a ready clone with one that restores its own; FileIoOnTheVirtioFsAndDenseDeviceSets times file I/O in a container on
// each (CAPSULE_BENCH_IO_RUNS, default 5). CAPSULE_BENCH_BOOT_NIC=0
// hot-plugs every pod NIC instead of taking over the VM's boot NIC.
// CAPSULE_BENCH_LOG=<file> keeps containerd's log (the shims' lines in it);
// <file>.pool the pool daemons' output, <file>.console the sequential warm
// pods' VM consoles (the agent's lines).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <numeric>
#include <regex>
#include <thread>
#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "runtime/host/process_usage.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/command.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/containerd_leaks.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/images/test_images.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/status_matchers.h"

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
  // Its three CRI calls.
  double run_pod_ms = 0;
  double create_ms = 0;
  double start_ms = 0;
};

struct PodTimes {
  double total = -1;  // < 0: the pod did not start
  double run_pod = 0;
  double create = 0;
  double start = 0;
};

// Rss and Pss (kB) of a process: Pss divides each page among the processes
// mapping it, so pages KSM merged across VMs count once in all.
std::pair<double, double> RssPssKb(pid_t pid) {
  const ProcessMemory m = ReadProcessMemory(pid).value_or(ProcessMemory{});
  return {static_cast<double>(m.rss) / 1024, static_cast<double>(m.pss) / 1024};
}

std::string Ksm(const char* file) {
  auto v = ReadFile(std::string("/sys/kernel/mm/ksm/") + file);
  return v.ok() ? std::string(v->substr(0, v->find('\n'))) : "";
}
bool SetKsm(const char* file, const std::string& value) {
  return WriteFile(std::string("/sys/kernel/mm/ksm/") + file, value + "\n").ok();
}


// Every process on the host: pid -> (ppid, comm, cmdline with NULs as spaces).
struct ProcInfo {
  pid_t ppid = 0;
  std::string comm;
  std::string cmdline;
};
std::map<pid_t, ProcInfo> Processes() {
  std::map<pid_t, ProcInfo> out;
  for (const std::string& name : ListDir("/proc")) {
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    auto stat = ReadFile("/proc/" + name + "/stat");
    auto cmd = ReadFile("/proc/" + name + "/cmdline");
    auto comm = ReadFile("/proc/" + name + "/comm");
    if (!stat.ok() || !cmd.ok() || !comm.ok()) continue;
    const size_t close = stat->rfind(')');
    if (close == std::string::npos) continue;
    ProcInfo p;
    p.ppid = std::atoi(stat->c_str() + close + 4);  // ") S <ppid>"
    p.comm = comm->substr(0, comm->find('\n'));
    p.cmdline = *cmd;
    std::replace(p.cmdline.begin(), p.cmdline.end(), '\0', ' ');
    out[pid] = std::move(p);
  }
  return out;
}

// User + system CPU time of a process so far (0 once it is gone).
double CpuSeconds(pid_t pid) {
  auto usage = ProcessUsage(pid);
  return usage.ok() ? usage->cpu_seconds : 0;
}

// The name a dense template's sealed RAM has in a clone's maps and fds
// (vm_template.cc names the memfd).
constexpr std::string_view kTemplateRam = "memfd:capsule-template-";

// A pod's host processes and what they cost: Pss (MiB) by kind, and the
// CPU they used over a window.
struct PodCost {
  std::map<std::string, double> pss_mib;  // by comm
  double total_pss_mib = 0;
  double own_mib = 0;  // its own memory (process_usage.h): anonymous, no other process maps it
  double tcg_mib = 0;      // of that, QEMU's TCG translation cache (absent under KVM)
  double guest_mib = 0;    // and a clone's guest pages it wrote (its copies of template pages)
  std::map<std::string, double> own_by;  // own_mib by comm
  double millicores = 0;
};

PodCost Cost(const std::vector<pid_t>& pids, const std::map<pid_t, ProcInfo>& procs, std::chrono::seconds window) {
  PodCost c;
  std::map<pid_t, double> cpu0;
  for (pid_t p : pids) cpu0[p] = CpuSeconds(p);
  std::this_thread::sleep_for(window);
  double cpu = 0;
  for (pid_t p : pids) {
    cpu += CpuSeconds(p) - cpu0[p];
    const double pss = RssPssKb(p).second / 1024;
    auto it = procs.find(p);
    c.pss_mib[it == procs.end() ? "?" : it->second.comm] += pss;
    c.total_pss_mib += pss;
    const double own = static_cast<double>(ReadProcessMemory(p).value_or(ProcessMemory{}).own_bytes) / (1 << 20);
    c.own_mib += own;
    c.own_by[it == procs.end() ? "?" : it->second.comm] += own;
    if (it != procs.end() && it->second.comm.rfind("qemu", 0) == 0) {
      c.tcg_mib += static_cast<double>(TcgCacheBytes(p).value_or(0)) / (1 << 20);
      c.guest_mib += static_cast<double>(OwnBytesIn(p, kTemplateRam).value_or(0)) / (1 << 20);
    }
  }
  c.millicores = cpu * 1000 / static_cast<double>(window.count());
  return c;
}

class PodStartBench : public ::testing::Test {
 protected:
  void SetUp() override {
    // CAPSULE_BENCH_BOOT_NIC=0: every pod NIC hot-plugged (guest.boot_nic
    // off), to measure the boot NIC against a hot-plug.
    const char* boot_nic = std::getenv("CAPSULE_BENCH_BOOT_NIC");
    boot_nic_ = boot_nic == nullptr || std::string(boot_nic) != "0";
    auto env = E2eEnv::Create(boot_nic_);
    ASSERT_OK(env);
    env_.emplace(std::move(*env));
    // capsule-cold: the same config with the pool off.
    cold_config_ = env_->dir() + "/capsule-cold.yaml";
    auto yaml = ReadFile(env_->config_path());
    ASSERT_OK(yaml);
    std::string cold = std::regex_replace(*yaml, std::regex("pool:\n  size: 1"), "pool:\n  size: 0");
    ASSERT_OK(WriteFile(cold_config_, cold));
    // capsule-dense: guest.device_set dense with a pool of its own (socket,
    // cgroup, state dir: its templates are not the other pool's).
    dense_config_ = env_->dir() + "/capsule-dense.yaml";
    dense_socket_ = env_->dir() + "/pool-dense.sock";
    std::string dense = std::regex_replace(*yaml, std::regex("device_set: virtio-fs"), "device_set: dense");
    dense = std::regex_replace(dense, std::regex(env_->pool_socket()), dense_socket_);
    dense = std::regex_replace(dense, std::regex("cgroup: /capsule-pool-"), "cgroup: /capsule-pool-dense-");
    dense = std::regex_replace(dense, std::regex("state_dir: " + env_->state_dir()), "state_dir: " + env_->dir() + "/dense-state");
    ASSERT_OK(WriteFile(dense_config_, dense));
    ContainerdOptions o;
    o.path_prepend = {E2eEnv::ShimDir()};
    o.cri.emplace();
    o.cri->cni = true;
    o.cri->runtimes = {{"capsule", kCapsuleRuntimeType, {{"ConfigPath", env_->config_path()}}},
                       {"capsule-cold", kCapsuleRuntimeType, {{"ConfigPath", cold_config_}}},
                       {"capsule-dense", kCapsuleRuntimeType, {{"ConfigPath", dense_config_}}}};
    if (GvisorUsable()) o.cri->runtimes.push_back({"runsc", "io.containerd.runc.v2", {{"BinaryName", "/usr/bin/runsc"}}});
    auto c = ContainerdHarness::Start(o);
    ASSERT_OK(c);
    ctrd_ = std::move(*c);
    for (const char* image : {"busybox", "pause"}) {
      Status imported = ctrd_->ImportImage(TestImageTar(image));
      ASSERT_OK(imported);
    }
    auto client = cri::CriClient::Connect(ctrd_->grpc_address(), milliseconds(20000));
    ASSERT_OK(client);
    cri_ = std::move(*client);
    cri_->set_call_timeout(milliseconds(300000));
  }
  // Appends `text` to CAPSULE_BENCH_LOG's <file><suffix>, when it is set.
  static void KeepLog(const std::string& suffix, const std::string& text) {
    const char* keep = std::getenv("CAPSULE_BENCH_LOG");
    if (keep == nullptr || *keep == '\0') return;
    std::ofstream out(std::string(keep) + suffix, std::ios::app);
    out << text;
  }
  // Each pool daemon's output goes to <file>.pool once it stopped (the
  // burst replaces the daemon).
  static void StopPool(PoolDaemonProcess& pool) {
    pool.Stop();
    KeepLog(".pool", pool.log());
  }
  void TearDown() override {
    if (pool_) StopPool(*pool_);
    if (dense_pool_) StopPool(*dense_pool_);
    cri_.reset();
    if (!ctrd_) return;
    if (const char* keep = std::getenv("CAPSULE_BENCH_LOG"); keep != nullptr && *keep != '\0')
      (void)WriteFile(keep, ctrd_->LogTail(256 << 20));
    auto leaks = env_->Leaks(ctrd_->grpc_address(), {ctrd_->dir()});
    for (auto& l : ctrd_->Leaks()) leaks.push_back(std::move(l));
    // The dense handler's VMs live in a state dir of their own.
    const auto dense_vms = E2eEnv::Processes({env_->dir() + "/dense-state"});
    for (const auto& [pid, cmd] : dense_vms) leaks.push_back(fmt::format("process {}: {}", pid, cmd));
    EXPECT_TRUE(leaks.empty()) << leaks.front();
    if (!leaks.empty()) env_->Reap(ctrd_->grpc_address(), {ctrd_->dir()});
    // A failed case must not leave them running for the next bench.
    for (const auto& [pid, cmd] : dense_vms) ::kill(pid, SIGKILL);
  }

  bool GvisorUsable() {
    if (::access("/usr/bin/runsc", X_OK) != 0) {
      gvisor_skip_ = "/usr/bin/runsc is not installed (Debian package runsc)";
      return false;
    }
    return true;
  }

  // One pod start (timed: RunPodSandbox until the container runs); the pod
  // stays until Remove(). total < 0 on failure.
  PodTimes StartPod(const std::string& handler, const std::string& name, std::string* pod_id,
                    std::string* container_id = nullptr) {
    using Clock = std::chrono::steady_clock;
    auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    PodTimes t;
    cri::PodOptions pod;
    pod.name = name;
    pod.runtime_handler = handler;
    pod.network = v1::POD;
    const v1::PodSandboxConfig config = cri::MakePodConfig(pod);
    cri::ContainerOptions c;
    c.name = "sleeper";
    c.image = kBusyboxImage;
    c.command = {"sleep", "3600"};
    const auto t0 = Clock::now();
    auto id = cri_->RunPod(config, handler == "runc" ? "" : handler);
    const auto t1 = Clock::now();
    EXPECT_OK(id) << handler << ": " << id.status().ToString();
    if (!id.ok()) return t;
    *pod_id = *id;
    auto cid = cri_->CreateContainer(*id, config, c);
    const auto t2 = Clock::now();
    if (cid.ok() && container_id != nullptr) *container_id = *cid;
    EXPECT_OK(cid);
    Status started = cid.ok() ? cri_->StartContainer(*cid) : cid.status();
    const auto t3 = Clock::now();
    EXPECT_OK(started);
    if (!started.ok()) return t;
    t = {ms(t0, t3), ms(t0, t1), ms(t1, t2), ms(t2, t3)};
    return t;
  }
  void Record(const std::string& variant, const std::string& mode, const PodTimes& t) {
    if (t.total >= 0) samples_.push_back({variant, mode, t.total, t.run_pod, t.create, t.start});
  }
  // StopPodSandbox + RemovePodSandbox of a pod whose container still runs
  // (CRI stops it first, as the kubelet's pod deletion does); ms, < 0 on failure.
  double Remove(const std::string& pod_id) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool stopped = cri_->StopPod(pod_id).ok();
    const bool removed = cri_->RemovePod(pod_id).ok();
    EXPECT_TRUE(stopped && removed) << "stop or remove pod " << pod_id;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return stopped && removed ? ms : -1;
  }
  // Pod `i` of `variant`, started and removed; `settle_first` waits until
  // the pool is full and no refill runs, so no boot or clone shares the host.
  void SequentialOne(const std::string& variant, const std::string& handler, int i, bool settle_first) {
    if (settle_first) {
      ASSERT_OK(pool_->WaitReady(1, milliseconds(300000), /*settled=*/true));
    }
    std::string id, container;
    Record(variant, "sequential", StartPod(handler, fmt::format("{}-{}", variant, i), &id, &container));
    if (!container.empty()) sequential_containers_[variant].push_back(container);
    if (!container.empty() && variant == "capsule-warm") ReadGuestCreate(id, container);
    if (id.empty()) return;
    if (const double ms = Remove(id); ms >= 0) stops_[variant].push_back(ms);
  }
  void Sequential(const std::string& variant, const std::string& handler, int runs, bool settle_first) {
    for (int i = 0; i < runs; ++i) SequentialOne(variant, handler, i, settle_first);
  }
  // The guest agent's own account of a pod's set-up and of a container's
  // create, as the agent answers it and the shim logs it, in ms: for the
  // create its whole handling after the spec is parsed and the pod's create
  // lock taken, the namespace plan and storages' mounts, then the engine's
  // plan, cgroup, fork and set-up. The VM's console (gone once the pod
  // stops) is kept beside the bench's log.
  void ReadGuestCreate(const std::string& pod, const std::string& container) {
    const std::string log = ctrd_->LogTail(64 << 20);
    const std::regex created("container " + container + " created in [0-9.]+ ms: [^(]*\\(the agent's ([0-9.]+): "
                             "storages ([0-9.]+) ms, plan ([0-9.]+) ms, cgroup ([0-9.]+) ms, fork to pid ([0-9.]+) ms, "
                             "set-up to ready ([0-9.]+) ms\\)");
    if (std::smatch m; std::regex_search(log, m, created))
      guest_create_[container] = {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]),
                                  std::stod(m[4]), std::stod(m[5]), std::stod(m[6])};
    const std::regex setup("sandbox " + pod + " set up in the guest, the agent's ([0-9.]+) ms: clock and RNG ([0-9.]+) "
                           "ms, pod and holder ([0-9.]+) ms, [0-9]+ NIC\\(s\\) ([0-9.]+) ms, routes ([0-9.]+) ms");
    if (std::smatch m; std::regex_search(log, m, setup))
      for (size_t i = 0; i < guest_setup_.size(); ++i) guest_setup_[i].push_back(std::stod(m[i + 1]));
    const std::regex ready("sandbox " + pod + " ready in VM ([^ ]+) ");
    if (std::smatch m; std::regex_search(log, m, ready)) {
      const std::string vm = m[1];
      if (auto console = ReadFile(env_->state_dir() + "/vm/" + vm + "/console.log"); console.ok())
        KeepLog(".console", "==== pod " + pod + ", VM " + vm + "\n" + *console);
    }
  }
  void Concurrent(const std::string& variant, const std::string& handler, int n) {
    std::vector<std::future<std::pair<PodTimes, std::string>>> starts;
    for (int i = 0; i < n; ++i) {
      starts.push_back(std::async(std::launch::async, [this, handler, variant, i] {
        std::string id;
        PodTimes t = StartPod(handler, fmt::format("{}-c{}", variant, i), &id);
        return std::make_pair(t, id);
      }));
    }
    std::vector<std::string> ids;
    for (auto& f : starts) {
      auto [t, id] = f.get();
      Record(variant, "concurrent", t);
      if (!id.empty()) ids.push_back(id);
    }
    for (const auto& id : ids) Remove(id);
  }
  std::vector<double> Of(const std::string& variant, const std::string& mode,
                         double Sample::*field = &Sample::ms) const {
    std::vector<double> out;
    for (const auto& s : samples_)
      if (s.variant == variant && s.mode == mode) out.push_back(s.*field);
    return out;
  }
  void PrintCriCalls(const std::string& mode) {
    std::cout << "  per CRI call, p50 ms (RunPodSandbox / CreateContainer / StartContainer):\n";
    for (const char* v : {"runc", "capsule-cold", "capsule-warm", "gvisor"}) {
      if (Of(v, mode).empty()) continue;
      std::cout << fmt::format("    {:13} {:8.1f} / {:8.1f} / {:8.1f}\n", v,
                               Percentile(Of(v, mode, &Sample::run_pod_ms), 0.5),
                               Percentile(Of(v, mode, &Sample::create_ms), 0.5),
                               Percentile(Of(v, mode, &Sample::start_ms), 0.5));
    }
  }
  // The env's config with its pool section's `size: 1` line replaced by
  // `settings`, written as <dir>/pool-<name>.yaml.
  std::string PoolConfig(const std::string& name, const std::string& settings) {
    auto yaml = ReadFile(env_->config_path());
    EXPECT_OK(yaml);
    if (!yaml.ok()) return "";
    std::string text = std::regex_replace(*yaml, std::regex("pool:\n  size: 1"), "pool:\n  " + settings);
    EXPECT_NE(text, *yaml) << "the env's config has no 'pool:\n  size: 1'";
    const std::string path = env_->dir() + "/pool-" + name + ".yaml";
    EXPECT_OK(WriteFile(path, text));
    return path;
  }
  // CONCURRENCY pods against a pool of `size` ready VMs that refills by
  // `refill` ("template" or "boot") with two refills at once: a daemon of
  // its own config (same image, so the same shape key as the shim's).
  void Burst(const std::string& variant, const std::string& refill, uint32_t size, int n) {
    if (pool_) StopPool(*pool_);
    pool_.reset();
    const std::string path = PoolConfig(refill, fmt::format("size: {}\n  refill: {}\n  max_parallel_boots: 2\n  max_idle: {}",
                                                            size, refill, std::max(size, 8u)));
    ASSERT_FALSE(path.empty());
    auto started = PoolDaemonProcess::Start(path, env_->pool_socket());
    ASSERT_OK(started);
    pool_ = std::move(*started);
    auto st = pool_->WaitReady(size, milliseconds(900000), /*settled=*/true);
    ASSERT_OK(st);
    Concurrent(variant, "capsule", n);
    st = pool_->Status();
    if (st.ok() && !st->shapes.empty()) {
      const auto& sh = st->shapes[0];
      std::cout << fmt::format("  {}: pool of {} refilled by {}: {} boots (p50 {:.0f} ms), {} clones (p50 {:.0f} ms, "
                               "{} failed), {} claimed\n", variant, size, sh.refill, sh.boots, sh.boot_p50_ms,
                               sh.clones, sh.clone_p50_ms, sh.clone_failures, sh.claimed);
    }
  }
  // The QEMU processes of the pool's idle VMs (ids "pool-...").
  std::vector<pid_t> PoolQemuPids() {
    std::vector<pid_t> out;
    for (const auto& [pid, cmd] : E2eEnv::Processes({env_->state_dir() + "/vm/pool-"})) {
      if (cmd.find("qemu-system") != std::string::npos) out.push_back(pid);
    }
    return out;
  }
  // Memory of the idle pooled VMs (QEMU Rss and Pss, per VM), without KSM
  // and after KSM has scanned them twice; KSM's settings are put back.
  void PrintIdleMemoryWithAndWithoutKsm() {
    auto measure = [&](const char* label) {
      const auto pids = PoolQemuPids();
      std::vector<double> rss, pss;
      for (pid_t p : pids) {
        auto [r, q] = RssPssKb(p);
        rss.push_back(r / 1024);
        pss.push_back(q / 1024);
      }
      std::cout << fmt::format("  {:28} {} VMs: QEMU Rss p50 {:.1f} MiB, Pss p50 {:.1f} MiB per VM\n", label,
                               pids.size(), Percentile(rss, 0.5), Percentile(pss, 0.5));
    };
    std::cout << "idle pooled VMs (paused):\n";
    const std::string run = Ksm("run");
    if (run.empty()) {
      measure("KSM absent:");
      return;
    }
    const std::string to_scan = Ksm("pages_to_scan"), sleep_ms = Ksm("sleep_millisecs");
    if (!SetKsm("run", "2") || !SetKsm("run", "0")) {  // 2 unmerges what an earlier run merged
      measure(fmt::format("KSM {} (not writable):", run).c_str());
      return;
    }
    measure("KSM off:");
    SetKsm("pages_to_scan", "5000");
    SetKsm("sleep_millisecs", "10");
    SetKsm("run", "1");
    const long scans = std::atol(Ksm("full_scans").c_str());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    while (std::atol(Ksm("full_scans").c_str()) < scans + 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(milliseconds(500));
    measure(fmt::format("KSM on ({} full scans):", std::atol(Ksm("full_scans").c_str()) - scans).c_str());
    std::cout << fmt::format("  KSM pages_sharing {} ({:.1f} MiB saved)\n", Ksm("pages_sharing"),
                             std::atof(Ksm("pages_sharing").c_str()) * 4096 / (1 << 20));
    SetKsm("run", "2");
    SetKsm("run", run == "1" ? "1" : "0");
    SetKsm("pages_to_scan", to_scan);
    SetKsm("sleep_millisecs", sleep_ms);
  }
  // The pod NIC lines: host part (tap moved or made, tc mirror, hot-plug),
  // per kind of NIC; the guest part is in the sandbox's SetupSandbox.
  void PrintNicBreakdown() {
    const std::string log = ctrd_->LogTail(64 << 20);
    for (const char* kind : {"boot NIC", "hot-plugged"}) {
      std::regex line(std::string(kind) + R"(.*; tap [a-z ]+ in ([0-9.]+) ms)");
      std::vector<double> host;
      for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
        host.push_back(std::stod((*it)[1]));
      if (host.empty()) continue;
      std::cout << fmt::format("pod NICs, {}: host side {} (the guest side is in SetupSandbox)\n", kind,
                               Summary(host));
    }
  }
  // Why pods cold-booted: the shim's "cold-booting VM X (...): <reason>"
  // lines, counted by reason (a warm pod that missed the pool shows here).
  void PrintColdBootReasons() {
    const std::string log = ctrd_->LogTail(64 << 20);
    std::regex line(R"(cold-booting VM [^ ]+ \([^)]*\): ([^\n]*))");
    std::map<std::string, int> reasons;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it)
      ++reasons[(*it)[1].str().substr(0, 160)];
    std::cout << "cold boots by reason:\n";
    for (const auto& [why, n] : reasons) std::cout << fmt::format("  {:4} {}\n", n, why);
  }
  // Only the first `sequential` lines count: the pods started one after
  // another (the concurrent ones queue behind each other in the guest CPUs).
  void PrintWarmBreakdown(size_t sequential) {
    const std::string log = ctrd_->LogTail(64 << 20);
    std::regex line(R"(claimed from the pool in ([0-9.]+) ms, then ([0-9.]+) ms: host network ([0-9.]+) ms \(([^)]*)\), guest set-up ([0-9.]+) ms in ([0-9]+) guest round trip\(s\), cgroup and port-forward ([0-9.]+) ms beside it)");
    const std::regex taken_over(R"(taken over in ([0-9.]+) ms)");
    std::vector<double> claim, setup, net, guest, calls, beside, boot_nic;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), line);
         it != std::sregex_iterator() && claim.size() < sequential; ++it) {
      claim.push_back(std::stod((*it)[1]));
      setup.push_back(std::stod((*it)[2]));
      net.push_back(std::stod((*it)[3]));
      const std::string nics = (*it)[4];
      if (std::smatch m; std::regex_search(nics, m, taken_over)) boot_nic.push_back(std::stod(m[1]));
      guest.push_back(std::stod((*it)[5]));
      calls.push_back(std::stod((*it)[6]));
      beside.push_back(std::stod((*it)[7]));
    }
    // The claim's own parts, from the shim's pool and adoption lines.
    const std::regex claimed(R"(claimed pooled VM .* hand-over ([0-9.]+) ms, the pool's answer ([0-9.]+) ms, )"
                             R"(adopted ([0-9.]+) ms after it)");
    const std::regex adopted(R"(the agent answers: VMM \(lock, vm.json, QMP\) ([0-9.]+) ms, vsock and virtiofsd )"
                             R"(([0-9.]+) ms, agent \(dial, token, Check\) ([0-9.]+) ms: dial ([0-9.]+) ms, )"
                             R"(token ([0-9.]+) ms, Check ([0-9.]+) ms)");
    std::vector<double> handover, answer, adopt, adopt_vmm, adopt_ends, adopt_agent, dial, token, check;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), claimed);
         it != std::sregex_iterator() && handover.size() < sequential; ++it) {
      handover.push_back(std::stod((*it)[1]));
      answer.push_back(std::stod((*it)[2]));
      adopt.push_back(std::stod((*it)[3]));
    }
    for (auto it = std::sregex_iterator(log.begin(), log.end(), adopted);
         it != std::sregex_iterator() && adopt_vmm.size() < sequential; ++it) {
      adopt_vmm.push_back(std::stod((*it)[1]));
      adopt_ends.push_back(std::stod((*it)[2]));
      adopt_agent.push_back(std::stod((*it)[3]));
      dial.push_back(std::stod((*it)[4]));
      token.push_back(std::stod((*it)[5]));
      check.push_back(std::stod((*it)[6]));
    }
    const auto& in_guest = guest_setup_;  // whole, fresh, pod, NICs, routes
    std::cout << "warm path in the shim, sequential pods (RunPodSandbox's share; the rest is containerd, CNI and the "
                 "two container calls):\n"
              << "  [host+guest] claim + adopt (pool hand-over, vm.lock, agent Check): " << Summary(claim) << "\n"
              << "    [host]  the pool daemon's hand-over (its own account):         " << Summary(handover) << "\n"
              << "    [host]  claim request to the pool's answer (the shim's):       " << Summary(answer) << "\n"
              << "    [host+guest] adoption after the answer:                        " << Summary(adopt) << "\n"
              << "      [host]  VMM attach (vm.lock, vm.json, QMP):                  " << Summary(adopt_vmm) << "\n"
              << "      [host]  vsock and virtiofsd host ends:                       " << Summary(adopt_ends) << "\n"
              << "      [guest] agent dial, token, Check, the wait after the attach: " << Summary(adopt_agent) << "\n"
              << "        [guest] dial (hybrid vsock CONNECT, guest accept):         " << Summary(dial) << "\n"
              << "        [guest] token (AUTH line, the agent's OK):                 " << Summary(token) << "\n"
              << "        [guest] Check (gRPC's first call; beside the attach):      " << Summary(check) << "\n"
              << "  then, until ready:                                             " << Summary(setup) << "\n"
              << "    [host]  network (netns read, boot NIC check or hot-plug):      " << Summary(net) << "\n"
              << "    [guest] SetupSandbox (clock, RNG, sandbox, NICs, routes):      " << Summary(guest) << "\n"
              << "      [guest] the agent's handling, by its answer:                 " << Summary(in_guest[0]) << "\n"
              << "        [guest] clock and RNG reseed:                            " << Summary(in_guest[1]) << "\n"
              << "        [guest] pod and its holder adopted:                      " << Summary(in_guest[2]) << "\n"
              << "        [guest] NICs (name, MAC, MTU, addresses, up):            " << Summary(in_guest[3]) << "\n"
              << "        [guest] routes:                                          " << Summary(in_guest[4]) << "\n"
              << "    [host]  boot NIC tap moved + tc, beside the guest call:        " << Summary(boot_nic) << "\n"
              << "    [host]  cgroup move + port-forward, beside the guest call:     " << Summary(beside) << "\n"
              << fmt::format("  guest round trips at RunPodSandbox after the hand-over:          p50 {:.0f}  max {:.0f}  (n={})\n",
                             Percentile(calls, 0.5), Percentile(calls, 1.0), calls.size());
    const double run_pod = Percentile(Of("capsule-warm", "sequential", &Sample::run_pod_ms), 0.5);
    const double shim = Percentile(claim, 0.5) + Percentile(setup, 0.5);
    std::cout << fmt::format("  RunPodSandbox p50 {:.1f} ms, of which the shim's sandbox start {:.1f} ms: containerd, "
                             "CNI and the shim's own start take the other {:.1f} ms\n",
                             run_pod, shim, run_pod - shim)
              << fmt::format("  CreateContainer p50 {:.1f} ms, StartContainer p50 {:.1f} ms\n",
                             Percentile(Of("capsule-warm", "sequential", &Sample::create_ms), 0.5),
                             Percentile(Of("capsule-warm", "sequential", &Sample::start_ms), 0.5));
  }
  // The container calls of the sequential warm pods, from the shim's lines:
  // what StartContainer spends in the shim (CRI's container create happens
  // at start), and of that the guest's create and start.
  void PrintContainerBreakdown() {
    const std::string log = ctrd_->LogTail(64 << 20);
    std::vector<double> created, files, guest, stdio, started;
    std::array<std::vector<double>, 6> in_guest;  // handled, storages, plan, cgroup, fork to pid, set-up to ready
    std::vector<double> outside;  // the shim's guest create less the agent's handling: wire, gRPC, parse, lock
    std::vector<double> agent_start, start_outside;  // the agent's start, and the shim's less it
    for (const std::string& id : sequential_containers_["capsule-warm"]) {
      if (auto g = guest_create_.find(id); g != guest_create_.end())
        for (size_t i = 0; i < in_guest.size(); ++i) in_guest[i].push_back(g->second[i]);
      std::smatch m;
      const std::regex create("container " + id + " created in ([0-9.]+) ms: spec and host files ([0-9.]+) ms, guest "
                              "create ([0-9.]+) ms");
      if (std::regex_search(log, m, create)) {
        created.push_back(std::stod(m[1]));
        files.push_back(std::stod(m[2]));
        guest.push_back(std::stod(m[3]));
        if (auto g = guest_create_.find(id); g != guest_create_.end()) outside.push_back(guest.back() - g->second[0]);
      }
      const std::regex start("container " + id +
                             R"( started \(guest pid [0-9]+\) in ([0-9.]+) ms \(the agent's ([0-9.]+)\), stdio ([0-9.]+) ms)");
      if (std::regex_search(log, m, start)) {
        started.push_back(std::stod(m[1]));
        agent_start.push_back(std::stod(m[2]));
        start_outside.push_back(started.back() - agent_start.back());
        stdio.push_back(std::stod(m[3]));
      }
    }
    std::cout << "container path in the shim, sequential warm pods (StartContainer's share; CRI creates the task "
                 "at start):\n"
              << "  task create:                                                   " << Summary(created) << "\n"
              << "    [host]  spec and host files (share binds, rootfs):           " << Summary(files) << "\n"
              << "    [guest] CreateContainer (storages, cgroup, fork, set-up):    " << Summary(guest) << "\n"
              << "      of it, by the agent's answer:\n"
              << "      [both]  vsock, gRPC, parse, pod lock (shim's - agent's):   " << Summary(outside) << "\n"
              << "      [guest] the agent's handling, after the spec is parsed:    " << Summary(in_guest[0]) << "\n"
              << "        [guest] namespace joins planned, storages mounted:       " << Summary(in_guest[1]) << "\n"
              << "        [guest] plan (rootfs, namespaces, seccomp compile):      " << Summary(in_guest[2]) << "\n"
              << "        [guest] cgroup (made, limits written):                   " << Summary(in_guest[3]) << "\n"
              << "        [guest] fork to pid (agent fork, namespaces, clone):     " << Summary(in_guest[4]) << "\n"
              << "        [guest] set-up to ready (mounts, pivot_root, creds):     " << Summary(in_guest[5]) << "\n"
              << "  [guest] StartContainer (the go; the exec follows the answer):  " << Summary(started) << "\n"
              << "      [both]  vsock, gRPC, lookup (shim's - agent's):            " << Summary(start_outside) << "\n"
              << "      [guest] the agent's start (lookup, the go):                " << Summary(agent_start) << "\n"
              << "  [host]  stdio attach, after the start:                         " << Summary(stdio) << "\n";
  }
  void WriteCsvAndPlot() {
    const char* b = std::getenv("CAPSULE_BUILD_DIR");
    const std::string dir = std::string(b != nullptr ? b : ".") + "/bench";
    (void)MkdirAll(dir);
    std::ofstream csv(dir + "/pod_start.csv");
    csv << "variant,mode,ms,run_pod_sandbox_ms,create_container_ms,start_container_ms\n";
    for (const auto& s : samples_)
      csv << s.variant << "," << s.mode << "," << s.ms << "," << s.run_pod_ms << "," << s.create_ms << ","
          << s.start_ms << "\n";
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
  std::string dense_config_, dense_socket_;
  std::unique_ptr<PoolDaemonProcess> dense_pool_;
  std::unique_ptr<ContainerdHarness> ctrd_;
  std::unique_ptr<cri::CriClient> cri_;
  std::unique_ptr<PoolDaemonProcess> pool_;
  std::vector<Sample> samples_;
  std::map<std::string, std::vector<double>> stops_;  // by variant, sequential pods
  std::map<std::string, std::vector<std::string>> sequential_containers_;  // by variant
  std::map<std::string, std::array<double, 6>> guest_create_;              // by container, ReadGuestCreate
  std::array<std::vector<double>, 5> guest_setup_;  // SetupSandbox by the agent: whole, fresh, pod, NICs, routes
  std::string gvisor_skip_;
  bool boot_nic_ = true;
};

TEST_F(PodStartBench, RuncCapsuleColdCapsuleWarmAndGvisor) {
  const int runs = EnvInt("CAPSULE_BENCH_RUNS", 20);
  const int concurrency = EnvInt("CAPSULE_BENCH_CONCURRENCY", 10);
  std::cout << "pod start through CRI, containerd 1.6, CNI bridge; " << runs << " sequential pods and " << concurrency
            << " at once per variant\n";
  // Resized to `concurrency` ready VMs below: idle VMs are capped by max_idle.
  const std::string pool_config =
      PoolConfig("main", fmt::format("size: 1\n  max_idle: {}", std::max(concurrency, 8)));
  auto started = PoolDaemonProcess::Start(pool_config, env_->pool_socket());
  ASSERT_OK(started);
  pool_ = std::move(*started);
  auto st = pool_->WaitReady(1, milliseconds(300000), true);
  ASSERT_OK(st);
  std::cout << "pod NICs: " << (boot_nic_ ? "the VM's boot NIC taken over (guest.boot_nic)" : "hot-plugged (guest.boot_nic off)")
            << "\n";
  std::cout << "accelerator: " << st->accelerator << "; KSM " << (st->ksm.empty() ? "absent" : st->ksm) << "\n";
  if (!st->shapes.empty()) {
    std::cout << fmt::format("pool boot of a VM: {:.0f} ms; idle pooled VM (paused): QEMU RSS {:.1f} MB\n",
                             st->shapes[0].boot_last_ms, static_cast<double>(st->shapes[0].idle_vm_rss_bytes) / 1e6);
  }

  // runc and warm pods take turns, each on a settled host (a warm pod's
  // claim starts a refill): warm/runc compares pods run side by side in
  // time, so a drift of the host's speed over the run (runc's own p50 went
  // from 265 to 345 ms between runs of one evening here) falls on both alike.
  for (int i = 0; i < runs; ++i) {
    SequentialOne("runc", "runc", i, true);
    SequentialOne("capsule-warm", "capsule", i, true);
  }
  Sequential("capsule-cold", "capsule-cold", runs, false);
  if (gvisor_skip_.empty()) Sequential("gvisor", "runsc", runs, false);

  Concurrent("runc", "runc", concurrency);
  Concurrent("capsule-cold", "capsule-cold", concurrency);
  ASSERT_OK(pool_->client().Resize(static_cast<uint32_t>(concurrency), milliseconds(5000)));
  ASSERT_OK(pool_->WaitReady(static_cast<uint32_t>(concurrency), milliseconds(900000), true));
  PrintIdleMemoryWithAndWithoutKsm();
  Concurrent("capsule-warm", "capsule", concurrency);
  if (gvisor_skip_.empty()) Concurrent("gvisor", "runsc", concurrency);
  const auto burst_pool = static_cast<uint32_t>(EnvInt("CAPSULE_BENCH_BURST_POOL", 3));
  std::cout << "\nburst of " << concurrency << " pods against a pool of " << burst_pool << ":\n";
  Burst("capsule-burst-template", "template", burst_pool, concurrency);
  Burst("capsule-burst-boot", "boot", burst_pool, concurrency);

  for (const char* mode : {"sequential", "concurrent"}) {
    std::cout << "\n" << mode << ":\n";
    for (const char* v : {"runc", "capsule-cold", "capsule-warm", "capsule-burst-template", "capsule-burst-boot",
                          "gvisor"}) {
      if (Of(v, mode).empty() && std::string(v).find("burst") != std::string::npos) continue;
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
    if (!Of("capsule-burst-template", mode).empty()) {
      std::cout << fmt::format("  burst p95: template refill {:.0f} ms, boot refill {:.0f} ms\n",
                               Percentile(Of("capsule-burst-template", mode), 0.95),
                               Percentile(Of("capsule-burst-boot", mode), 0.95));
    }
    PrintCriCalls(mode);
  }
  std::cout << "\nsequential stop (StopPodSandbox + RemovePodSandbox, the container still running):\n";
  for (const auto& [v, ms] : stops_) std::cout << fmt::format("  {:13} {}\n", v, Summary(ms));
  const double runc_stop = Percentile(stops_["runc"], 0.5);
  std::cout << fmt::format("  stop warm/runc p50 = {:.2f}\n",
                           runc_stop > 0 ? Percentile(stops_["capsule-warm"], 0.5) / runc_stop : 0);
  std::cout << "\n";
  PrintWarmBreakdown(static_cast<size_t>(runs));
  PrintContainerBreakdown();
  PrintColdBootReasons();
  PrintNicBreakdown();
  WriteCsvAndPlot();
}


// What a Capsule pod costs the node beyond its containers: the host
// processes of idle busybox pods (shim, QEMU with the guest RAM it touched,
// virtiofsd, the vsock back end), next to runc's (shim, pause, the
// container) in the same containerd. Prints the RuntimeClass
// overhead.podFixed these figures give (p90, rounded up), which
// deploy/kubernetes/runtimeclass.yaml records with where it came from.
TEST_F(PodStartBench, PerPodOverheadForTheRuntimeClass) {
  const int n = EnvInt("CAPSULE_BENCH_OVERHEAD_PODS", 3);
  const auto window = std::chrono::seconds(EnvInt("CAPSULE_BENCH_OVERHEAD_WINDOW_S", 10));
  // The dense handler's pods come from a pool of n copy-on-write clones of
  // one template, as a node's would.
  auto dense_yaml = ReadFile(dense_config_);
  ASSERT_OK(dense_yaml);
  ASSERT_TRUE(WriteFile(dense_config_, std::regex_replace(*dense_yaml, std::regex("pool:\n  size: 1"),
                                                          fmt::format("pool:\n  size: {}\n  max_idle: {}", n, n)))
                  .ok());
  auto dense_pool = PoolDaemonProcess::Start(dense_config_, dense_socket_);
  ASSERT_OK(dense_pool);
  dense_pool_ = std::move(*dense_pool);
  auto dense_ready = dense_pool_->WaitReady(static_cast<uint32_t>(n), milliseconds(900000), /*settled=*/true);
  ASSERT_OK(dense_ready) << dense_pool_->log();
  std::vector<std::string> runc_ids, capsule_ids, dense_ids;
  for (int i = 0; i < n; ++i) {
    std::string dense_id;
    ASSERT_GE(StartPod("capsule-dense", fmt::format("overhead-dense-{}", i), &dense_id).total, 0);
    dense_ids.push_back(dense_id);
  }
  for (int i = 0; i < n; ++i) {
    std::string id;
    ASSERT_GE(StartPod("runc", fmt::format("overhead-runc-{}", i), &id).total, 0);
    runc_ids.push_back(id);
    ASSERT_GE(StartPod("capsule-cold", fmt::format("overhead-capsule-{}", i), &id).total, 0);
    capsule_ids.push_back(id);
  }
  std::this_thread::sleep_for(std::chrono::seconds(5));  // boots settle
  const auto procs = Processes();
  // runc: the shim serving the pod id and everything under it.
  auto descendants = [&](pid_t root) {
    std::vector<pid_t> out = {root};
    for (size_t i = 0; i < out.size(); ++i)
      for (const auto& [pid, p] : procs)
        if (p.ppid == out[i]) out.push_back(pid);
    return out;
  };
  std::vector<double> runc_pss, runc_cpu, capsule_pss, capsule_cpu;
  std::map<std::string, std::vector<double>> capsule_by_kind;
  for (const auto& id : runc_ids) {
    pid_t shim = 0;
    for (const auto& [pid, p] : procs)
      if (p.comm.rfind("containerd-shim", 0) == 0 && p.cmdline.find("-id " + id) != std::string::npos) shim = pid;
    ASSERT_NE(shim, 0) << "no runc shim for pod " << id;
    PodCost c = Cost(descendants(shim), procs, window);
    runc_pss.push_back(c.total_pss_mib);
    runc_cpu.push_back(c.millicores);
  }
  // A pod's host processes: its shim and whatever runs from its VM's dir.
  auto vm_costs = [&](const std::string& config) -> std::vector<PodCost> {
    auto ps = RunCommand({std::string(std::getenv("CAPSULE_BUILD_DIR")) + "/runtime/cli/capsule-runtime", "--config",
                          config, "ps", "--json"},
                         milliseconds(30000));
    EXPECT_TRUE(ps.ok() && ps->ok()) << (ps.ok() ? ps->err : ps.status().ToString());
    std::vector<PodCost> out;
    if (!ps.ok() || !ps->ok()) return out;
    const auto listed = nlohmann::json::parse(ps->out, nullptr, false);
    EXPECT_TRUE(listed.is_array()) << ps->out;
    if (!listed.is_array()) return out;
    for (const auto& vm : listed) {
      if (!vm.contains("pod") || !vm["pod"].is_object()) continue;  // an idle pool VM
      const std::string dir = vm["state_dir"].get<std::string>();
      std::vector<pid_t> pids = {vm["pod"]["shim_pid"].get<pid_t>()};
      for (const auto& [pid, p] : procs)
        if (p.cmdline.find(dir + "/") != std::string::npos && pid != pids[0]) pids.push_back(pid);
      out.push_back(Cost(pids, procs, window));
    }
    return out;
  };
  for (const PodCost& c : vm_costs(cold_config_)) {
    capsule_pss.push_back(c.total_pss_mib);
    capsule_cpu.push_back(c.millicores);
    for (const auto& [kind, mib] : c.pss_mib) capsule_by_kind[kind].push_back(mib);
  }
  ASSERT_EQ(capsule_pss.size(), static_cast<size_t>(n));
  std::vector<double> dense_pss, dense_own, dense_own_kvm, dense_cpu;
  std::map<std::string, std::vector<double>> dense_by_kind;
  for (const PodCost& c : vm_costs(dense_config_)) {
    dense_pss.push_back(c.total_pss_mib);
    dense_own.push_back(c.own_mib);
    dense_own_kvm.push_back(c.own_mib - c.tcg_mib);
    dense_cpu.push_back(c.millicores);
    for (const auto& [kind, mib] : c.own_by) dense_by_kind[kind].push_back(mib);
    dense_by_kind["(qemu's TCG cache)"].push_back(c.tcg_mib);
    dense_by_kind["(qemu's guest pages)"].push_back(c.guest_mib);
  }
  ASSERT_EQ(dense_own.size(), static_cast<size_t>(n));
  // The template's sealed RAM: shared memory the pool daemon holds, counted
  // once per node whatever the number of pods.
  double template_mib = 0;
  for (const auto& [pid, p] : procs) {
    // The dense pool's daemon (capsule-poold, or `capsule-runtime pool serve`).
    if (p.cmdline.find(dense_config_) == std::string::npos || p.cmdline.find("pool serve") == std::string::npos)
      continue;
    for (const auto& fd : DirEntries(fmt::format("/proc/{}/fd", pid))) {
      const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
      char target[256] = {};
      if (::readlink(path.c_str(), target, sizeof target - 1) <= 0) continue;
      if (std::string(target).find(kTemplateRam) == std::string::npos) continue;
      struct stat st{};
      if (::stat(path.c_str(), &st) == 0) template_mib += static_cast<double>(st.st_blocks) * 512 / (1 << 20);
    }
  }
  auto line = [](const std::vector<double>& v, const char* unit) {
    return fmt::format("p50 {:.1f} {}, p90 {:.1f} {}, max {:.1f} {}", Percentile(v, 0.5), unit, Percentile(v, 0.9),
                       unit, Percentile(v, 1.0), unit);
  };
  std::cout << fmt::format("\nper-pod host cost, idle busybox pod (n={}, CPU over {} s):\n", n, window.count());
  std::cout << "  runc     Pss  " << line(runc_pss, "MiB") << "\n  runc     CPU  " << line(runc_cpu, "m") << "\n";
  std::cout << "  capsule  Pss  " << line(capsule_pss, "MiB") << "\n  capsule  CPU  " << line(capsule_cpu, "m") << "\n";
  for (const auto& [kind, v] : capsule_by_kind)
    std::cout << fmt::format("    {:18} Pss p50 {:.1f} MiB\n", kind, Percentile(v, 0.5));
  const double mem_ratio = Percentile(capsule_pss, 0.5) / std::max(0.1, Percentile(runc_pss, 0.5));
  std::cout << fmt::format("  capsule/runc Pss p50 = {:.1f}x\n", mem_ratio);
  const double mem = std::ceil(Percentile(capsule_pss, 0.9) / 8) * 8;
  const double cpu = std::ceil(Percentile(capsule_cpu, 0.9) / 10) * 10;
  std::cout << fmt::format("RuntimeClass overhead.podFixed (p90, rounded up): memory: \"{:.0f}Mi\", cpu: \"{:.0f}m\"\n",
                           mem, cpu);
  std::cout << "  dense    Pss  " << line(dense_pss, "MiB") << "\n  dense    own  " << line(dense_own, "MiB")
            << " (anonymous, no other process maps it: not the template's pages)\n  dense    own without TCG's translation cache (absent "
            << "under KVM)  " << line(dense_own_kvm, "MiB") << "\n  dense    CPU  " << line(dense_cpu, "m") << "\n";
  for (const auto& [kind, v] : dense_by_kind)
    std::cout << fmt::format("    {:18} own p50 {:.1f} MiB\n", kind, Percentile(v, 0.5));
  std::cout << fmt::format("  dense template's sealed RAM, once per node: {:.1f} MiB\n", template_mib);
  double dense_all = template_mib, dense_all_kvm = template_mib;
  for (double v : dense_own) dense_all += v;
  for (double v : dense_own_kvm) dense_all_kvm += v;
  std::cout << fmt::format("  {} dense pods in all (own + the template once): {:.1f} MiB ({:.1f} MiB without TCG's "
                           "translation cache); {} virtio-fs pods: {:.1f} MiB (Pss); 3 virtio-fs pods: {:.1f} MiB\n", n,
                           dense_all, dense_all_kvm, n,
                           std::accumulate(capsule_pss.begin(), capsule_pss.end(), 0.0),
                           3 * Percentile(capsule_pss, 0.5));
  std::cout << fmt::format("  dense own/runc Pss p50 = {:.1f}x\n",
                           Percentile(dense_own, 0.5) / std::max(0.1, Percentile(runc_pss, 0.5)));
  const double dense_mem = std::ceil(Percentile(dense_own, 0.9) / 8) * 8;
  const double dense_mem_kvm = std::ceil(Percentile(dense_own_kvm, 0.9) / 8) * 8;
  const double dense_cpu_m = std::ceil(Percentile(dense_cpu, 0.9) / 10) * 10;
  std::cout << fmt::format("RuntimeClass capsule-dense overhead.podFixed (own p90, rounded up): memory: \"{:.0f}Mi\", "
                           "cpu: \"{:.0f}m\"; without TCG's translation cache (a KVM node): memory: \"{:.0f}Mi\"\n",
                           dense_mem, dense_cpu_m, dense_mem_kvm);
  for (const auto& id : dense_ids) Remove(id);
  for (const auto& id : runc_ids) Remove(id);
  for (const auto& id : capsule_ids) Remove(id);
}

// File I/O in a container on each device set, same run, same image: the
// rootfs read through virtio-fs (capsule, pool off) against an erofs disk
// under a guest overlay (capsule-dense), and writes to the rootfs, which go
// to the host's overlay upper through virtio-fs or to guest memory. Each
// operation's wall time is an ExecSync's, less a `true` exec's (the
// channel's cost), median of CAPSULE_BENCH_IO_RUNS (default 5) runs.
// A dense claim with no ready clone restores one for itself: how much
// slower its pod starts than one that finds a ready (and rehearsed) clone,
// sequential pods, runc in the same run as the baseline.
TEST_F(PodStartBench, DenseClaimThatRestoresAgainstAReadyClone) {
  const int runs = EnvInt("CAPSULE_BENCH_RUNS", 20) / 2 + 1;
  auto dense_pool = PoolDaemonProcess::Start(dense_config_, dense_socket_);
  ASSERT_OK(dense_pool);
  dense_pool_ = std::move(*dense_pool);
  ASSERT_OK(dense_pool_->WaitReady(1, milliseconds(900000), /*settled=*/true)) << dense_pool_->log();
  std::map<std::string, std::vector<double>> ms;
  auto run = [&](const std::string& variant, const std::string& handler, int i) {
    std::string pod;
    const PodTimes t = StartPod(handler, fmt::format("{}-{}", variant, i), &pod);
    ASSERT_GE(t.total, 0) << variant;
    ms[variant].push_back(t.total);
    Remove(pod);
  };
  for (int i = 0; i < runs; ++i) {
    run("runc", "runc", i);
    ASSERT_OK(dense_pool_->WaitReady(1, milliseconds(300000), /*settled=*/true)) << dense_pool_->log();
    run("dense-ready", "capsule-dense", i);
  }
  // No ready clone from here on: every claim restores its own.
  ASSERT_OK(dense_pool_->client().Resize(0, milliseconds(5000)));
  for (int i = 0; i < runs; ++i) {
    run("runc", "runc", runs + i);
    run("dense-restore", "capsule-dense", i);
  }
  EXPECT_OK(dense_pool_->WaitForLog("restored for sandbox", milliseconds(10000))) << "no claim restored its clone";
  std::cout << "\ndense pod start (RunPodSandbox -> container running), sequential:\n";
  for (const char* v : {"runc", "dense-ready", "dense-restore"})
    std::cout << fmt::format("  {:14} {}\n", v, Summary(ms[v]));
  const double ready = Percentile(ms["dense-ready"], 0.5), restore = Percentile(ms["dense-restore"], 0.5);
  const double runc = Percentile(ms["runc"], 0.5);
  std::cout << fmt::format("  restore/ready p50 = {:.2f}\n  dense-ready/runc p50 = {:.2f}\n",
                           ready > 0 ? restore / ready : 0, runc > 0 ? ready / runc : 0);
}

TEST_F(PodStartBench, FileIoOnTheVirtioFsAndDenseDeviceSets) {
  const int runs = EnvInt("CAPSULE_BENCH_IO_RUNS", 5);
  auto dense_pool = PoolDaemonProcess::Start(dense_config_, dense_socket_);
  ASSERT_OK(dense_pool);
  dense_pool_ = std::move(*dense_pool);
  ASSERT_OK(dense_pool_->WaitReady(1, milliseconds(900000), /*settled=*/true)) << dense_pool_->log();
  struct Op {
    const char* name;
    const char* script;
  };
  // The busybox image: /bin holds ~400 links to one binary, /etc a few files.
  const Op ops[] = {
      {"exec baseline (true)", "true"},
      {"metadata: stat the rootfs x20", "for i in $(seq 20); do find / -xdev >/dev/null; done"},
      {"read: the busybox binary x50", "for i in $(seq 50); do cat /bin/busybox >/dev/null; done"},
      {"write: 32 MiB to the rootfs", "dd if=/dev/zero of=/big bs=1M count=32 2>/dev/null; sync; rm /big"},
      {"small files: create+read+delete 300", "mkdir -p /sf; for i in $(seq 300); do echo $i > /sf/$i; done; "
                                                "cat /sf/* >/dev/null; rm -r /sf"},
  };
  std::map<std::string, std::map<std::string, std::vector<double>>> ms;  // handler -> op -> samples
  for (const char* handler : {"capsule-cold", "capsule-dense"}) {
    std::string pod, ctr;
    ASSERT_GE(StartPod(handler, fmt::format("io-{}", handler), &pod, &ctr).total, 0);
    for (int r = 0; r < runs; ++r) {
      for (const Op& op : ops) {
        const auto t0 = std::chrono::steady_clock::now();
        auto out = cri_->ExecSync(ctr, {"sh", "-c", op.script}, 300);
        const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_OK(out) << handler << " " << op.name << ": " << out.status().ToString();
        ASSERT_EQ(out->exit_code, 0) << handler << " " << op.name << ": " << out->err;
        ms[handler][op.name].push_back(took);
      }
    }
    Remove(pod);
  }
  std::cout << fmt::format("\nfile I/O in a busybox container, ms (ExecSync wall time less the `true` exec's; "
                           "median of {} runs):\n", runs);
  std::cout << fmt::format("  {:40} {:>10} {:>10} {:>14}\n", "operation", "virtio-fs", "dense", "dense/virtio-fs");
  const double base_v = Percentile(ms["capsule-cold"][ops[0].name], 0.5);
  const double base_d = Percentile(ms["capsule-dense"][ops[0].name], 0.5);
  std::cout << fmt::format("  {:40} {:10.1f} {:10.1f}\n", ops[0].name, base_v, base_d);
  for (size_t i = 1; i < std::size(ops); ++i) {
    const double v = std::max(0.1, Percentile(ms["capsule-cold"][ops[i].name], 0.5) - base_v);
    const double d = std::max(0.1, Percentile(ms["capsule-dense"][ops[i].name], 0.5) - base_d);
    std::cout << fmt::format("  {:40} {:10.1f} {:10.1f} {:13.2f}x\n", ops[i].name, v, d, d / v);
  }
}

}  // namespace
}  // namespace capsule::testing
