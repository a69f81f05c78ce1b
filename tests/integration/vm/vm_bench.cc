// Benchmark (ctest -L bench), in one run on one machine: cold boots of a
// SandboxVm until the agent answers Check over vsock, and restores of
// clones from a template built in the same run (the pool's two refill
// paths), interleaved boot/clone so load changes hit both alike; medians
// and p90 of kRuns each with their breakdowns, and the ratio. Then the
// memory of one idle booted VM and one idle clone: QEMU (RSS, and RSS minus
// the guest RAM it has touched: memfd pages count as RssShmem), the guest
// RAM memfd's allocated pages (what the VM holds of host memory for its
// RAM, mapped or not), virtiofsd (both processes) and capsule-vsockd; Pss
// and own bytes (process_usage.h: anonymous, no other process maps them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <cstdio>
#include <sstream>
#include <thread>

#include <dirent.h>
#include <sys/stat.h>

#include <fcntl.h>

#include "runtime/host/process_usage.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/vm/sandbox_vm.h"
#include "runtime/vm/vm_template.h"
#include "tests/integration/vm/vm_test_env.h"
#include "tests/support/status_matchers.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
constexpr int kRuns = 5;
// Lets the guest settle (agent idle, no console output) before measuring.
constexpr milliseconds kSettle{3000};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double P90(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, (v.size() * 9) / 10)];
}

// Allocated bytes of the memfds a process holds (its guest RAM).
long MemfdKb(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  long kb = 0;
  for (const std::string& fd : ListDir(dir)) {
    char target[256] = {};
    ssize_t n = ::readlink((dir + "/" + fd).c_str(), target, sizeof target - 1);
    if (n <= 0 || std::string(target, n).rfind("/memfd:", 0) != 0) continue;
    struct stat st{};
    if (::stat((dir + "/" + fd).c_str(), &st) == 0) kb += static_cast<long>(st.st_blocks) / 2;
  }
  return kb;
}

struct Mem {
  long rss = 0, anon = 0, file = 0, shmem = 0, pss = 0, own = 0;
  Mem& operator+=(const Mem& o) {
    rss += o.rss, anon += o.anon, file += o.file, shmem += o.shmem, pss += o.pss, own += o.own;
    return *this;
  }
};

Mem MemOf(pid_t pid) {
  const ProcessMemory m = ReadProcessMemory(pid).value_or(ProcessMemory{});
  auto kb = [](uint64_t bytes) { return static_cast<long>(bytes >> 10); };
  return Mem{kb(m.rss), kb(m.rss_anon), kb(m.rss_file), kb(m.rss_shmem), kb(m.pss), kb(m.own_bytes)};
}

pid_t PidFromFile(const std::string& path) {
  auto t = ReadFile(path);
  return t.ok() ? static_cast<pid_t>(std::atoi(t->c_str())) : -1;
}

std::vector<pid_t> WithChildren(pid_t pid) {
  std::vector<pid_t> out = {pid};
  auto kids = ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  if (kids.ok()) {
    std::istringstream in(*kids);
    pid_t k;
    while (in >> k) out.push_back(k);
  }
  return out;
}

void PrintMem(const char* who, const Mem& m) {
  std::printf("  %-22s VmRSS %7.1f MB (anon %6.1f, file %6.1f, shmem %6.1f)  Pss %7.1f MB  own %6.1f MB\n", who,
              m.rss / 1024.0, m.anon / 1024.0, m.file / 1024.0, m.shmem / 1024.0, m.pss / 1024.0, m.own / 1024.0);
}

void ReportMemory(const SandboxVm& vm, const char* what, uint32_t guest_mib) {
  Mem qemu = MemOf(vm.vmm_pid());
  Mem vfs;
  for (pid_t p : WithChildren(PidFromFile(vm.state_dir() + "/virtiofsd.pid"))) vfs += MemOf(p);
  Mem vsockd = MemOf(PidFromFile(vm.state_dir() + "/vsockd.pid"));
  const long ram_kb = MemfdKb(vm.vmm_pid());
  std::printf("\nmemory of one idle %s (%u MiB guest, TCG), %lld s after it was ready:\n", what, guest_mib,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kSettle).count()));
  PrintMem("QEMU", qemu);
  std::printf("  %-22s %7.1f MB (VmRSS minus RssShmem = guest RAM touched %.1f MB)\n", "QEMU own overhead",
              (qemu.rss - qemu.shmem) / 1024.0, qemu.shmem / 1024.0);
  std::printf("  %-22s %7.1f MB allocated (shared with no other VM)\n", "guest RAM memfd", ram_kb / 1024.0);
  PrintMem("virtiofsd (2 procs)", vfs);
  PrintMem("capsule-vsockd", vsockd);
  Mem all = qemu;
  all += vfs;
  all += vsockd;
  std::printf("  %-22s Pss %.1f MB, Pss minus guest RAM %.1f MB; host memory of the VM (guest RAM + QEMU anon + "
              "helpers' own) %.1f MB\n", "all three", all.pss / 1024.0, (all.pss - qemu.shmem) / 1024.0,
              (ram_kb + qemu.anon + vfs.own + vsockd.own) / 1024.0);
}

TEST(VmBench, ColdBootToAgentCheckAndIdleMemory) {
  auto env = testing::TestEnv::Create();
  ASSERT_OK(env);
  std::vector<double> total, prepare, vmm, agent, guest_ready;
  SandboxVmPtr last;
  for (int i = 0; i < kRuns; ++i) {
    SandboxVmSpec spec;
    spec.id = "bench-" + std::to_string(i);
    auto vm = SandboxVm::Boot((*env)->config(), spec);
    ASSERT_OK(vm);
    const BootTimings& t = (*vm)->timings();
    auto version = (*(*vm)->agent())->Version();
    ASSERT_OK(version);
    total.push_back(t.total_ms), prepare.push_back(t.prepare_ms), vmm.push_back(t.vmm_start_ms);
    agent.push_back(t.agent_ready_ms), guest_ready.push_back(version->ready_monotonic_us() / 1000.0);
    std::printf("boot %d: total %6.0f ms = prepare %5.0f + VMM start %5.0f + kernel+agent %6.0f  (guest clock at "
                "agent ready %.0f ms)\n",
                i + 1, t.total_ms, t.prepare_ms, t.vmm_start_ms, t.agent_ready_ms, guest_ready.back());
    std::fflush(stdout);
    if (i + 1 < kRuns) {
      ASSERT_TRUE((*vm)->Stop(milliseconds(10000)).ok());
    } else {
      last = std::move(*vm);
    }
  }
  std::printf("\ncold boot to agent Check, median of %d: %.0f ms = prepare %.0f ms + VMM start %.0f ms + "
              "kernel and agent %.0f ms (guest CLOCK_BOOTTIME at agent ready: %.0f ms)\n",
              kRuns, Median(total), Median(prepare), Median(vmm), Median(agent), Median(guest_ready));
  // What one agent call costs on its own (the floor under every guest round
  // trip of a pod start): an empty Check, on the booted VM's connection.
  std::vector<double> check;
  auto agent_client = last->agent();
  ASSERT_OK(agent_client);
  for (int i = 0; i < 50; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE((*agent_client)->Check(milliseconds(10000)).ok());
    check.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(check.begin(), check.end());
  std::printf("agent Check round trip (gRPC over the vsock), 50 calls: p50 %.2f ms, p90 %.2f ms, max %.2f ms\n",
              check[check.size() / 2], check[check.size() * 9 / 10], check.back());
  std::this_thread::sleep_for(kSettle);
  ReportMemory(*last, "booted VM", (*env)->config().guest.default_memory_mib);
  std::fflush(stdout);
  ASSERT_OK(last->Stop(milliseconds(10000)));
  EXPECT_TRUE((*env)->Leftovers().empty());
}

// The pool's two refill paths side by side: a cold boot and a clone of a
// template, alternated, kRuns each, after one template build.
TEST(VmBench, ARefillFromATemplateAgainstAColdBoot) {
  auto env = testing::TestEnv::Create();
  ASSERT_OK(env);
  const config::Config& cfg = (*env)->config();
  auto tpl = BuildTemplate(cfg, (*env)->state_dir() + "/templates",
                           TemplateSpec{"00000000bebe0000", cfg.guest.default_vcpus, cfg.guest.default_memory_mib});
  ASSERT_OK(tpl);
  std::printf("template built in %.0f ms: RAM image %.1f MB allocated, device state %.1f KB\n", tpl->build_ms,
              tpl->ram_allocated_bytes / 1e6, tpl->state_bytes / 1e3);
  std::vector<double> boot, clone, copy, vmm, load, plug, agent;
  SandboxVmPtr last_boot, last_clone;
  for (int i = 0; i < kRuns; ++i) {
    SandboxVmSpec b;
    b.id = "bench-boot-" + std::to_string(i);
    auto booted = SandboxVm::Boot(cfg, b);
    ASSERT_OK(booted);
    boot.push_back((*booted)->timings().total_ms);
    SandboxVmSpec c;
    c.id = "bench-clone-" + std::to_string(i);
    auto cloned = SandboxVm::Restore(cfg, c, *tpl);
    ASSERT_OK(cloned);
    const BootTimings& t = (*cloned)->timings();
    clone.push_back(t.total_ms), copy.push_back(t.ram_copy_ms), vmm.push_back(t.vmm_start_ms);
    load.push_back(t.state_load_ms), plug.push_back(t.hotplug_ms), agent.push_back(t.agent_ready_ms);
    std::printf("run %d: cold boot %6.0f ms | clone %5.0f ms = prepare %4.0f + RAM copy %4.0f + VMM start %4.0f + "
                "state %3.0f + hot-plug %3.0f + agent %4.0f\n", i + 1, boot.back(), t.total_ms, t.prepare_ms,
                t.ram_copy_ms, t.vmm_start_ms, t.state_load_ms, t.hotplug_ms, t.agent_ready_ms);
    std::fflush(stdout);
    if (i + 1 < kRuns) {
      ASSERT_TRUE((*booted)->Stop(milliseconds(10000)).ok());
      ASSERT_TRUE((*cloned)->Stop(milliseconds(10000)).ok());
    } else {
      last_boot = std::move(*booted);
      last_clone = std::move(*cloned);
    }
  }
  std::printf("\nrefill per VM, %d runs each: cold boot p50 %.0f ms (p90 %.0f); clone p50 %.0f ms (p90 %.0f) "
              "[RAM copy %.0f, VMM start %.0f, state %.0f, hot-plug %.0f, agent %.0f]; boot/clone p50 = %.1fx\n",
              kRuns, Median(boot), P90(boot), Median(clone), P90(clone), Median(copy), Median(vmm), Median(load),
              Median(plug), Median(agent), Median(clone) > 0 ? Median(boot) / Median(clone) : 0.0);
  std::this_thread::sleep_for(kSettle);
  ReportMemory(*last_boot, "booted VM", cfg.guest.default_memory_mib);
  ReportMemory(*last_clone, "clone (full RAM copy: its vhost-user devices need shared RAM)",
               cfg.guest.default_memory_mib);
  std::fflush(stdout);
  ASSERT_OK(last_boot->Stop(milliseconds(10000)));
  ASSERT_OK(last_clone->Stop(milliseconds(10000)));
  EXPECT_OK(RemoveTemplate(cfg, tpl->dir));
  EXPECT_TRUE((*env)->Leftovers().empty());
}

// The dense device set (guest.device_set: dense): copy-on-write clones of a
// template made by SandboxVm::Restore as the pool makes them, RAM mapped
// private from the template's sealed memfd, the agent checked over the
// serial vsock, QEMU unprivileged and jailed where the bench runs as root.
// In one run: kRuns restores to agent Check interleaved with cold boots of
// the same device set (the ratio), then kIdleClones idle clones' memory
// against one booted VM's: per clone what is its own (process_usage.h:
// QEMU's incl. TCG's translation cache, capsule-vsockd's), the template's
// pages, even those only one clone reads, counted once for all.
constexpr int kIdleClones = 10;

TEST(VmBench, CopyOnWriteClonesOnTheSerialVsockAgainstColdBoots) {
  auto env = testing::TestEnv::Create();
  ASSERT_OK(env);
  config::Config cfg = (*env)->config();
  cfg.guest.device_set = config::DeviceSet::kDense;
  cfg.vsock.backend = config::VsockBackendKind::kSerial;
  auto tpl = BuildTemplate(cfg, (*env)->state_dir() + "/templates",
                           TemplateSpec{"00000000c0c00000", cfg.guest.default_vcpus, cfg.guest.default_memory_mib});
  ASSERT_OK(tpl);
  std::vector<double> boot, clone;
  SandboxVmPtr booted_last;
  for (int i = 0; i < kRuns; ++i) {
    SandboxVmSpec b;
    b.id = "bench-boot-" + std::to_string(i);
    auto booted = SandboxVm::Boot(cfg, b);
    ASSERT_OK(booted);
    boot.push_back((*booted)->timings().total_ms);
    SandboxVmSpec cs;
    cs.id = "cow-run-" + std::to_string(i);
    auto c = SandboxVm::Restore(cfg, cs, *tpl);
    ASSERT_OK(c);
    clone.push_back((*c)->timings().total_ms);
    std::printf("run %d: cold boot (dense) %6.0f ms | copy-on-write clone to agent Check %5.0f ms\n", i + 1,
                boot.back(), clone.back());
    std::fflush(stdout);
    ASSERT_TRUE((*c)->Stop(milliseconds(10000)).ok());
    if (i + 1 < kRuns) {
      ASSERT_TRUE((*booted)->Stop(milliseconds(10000)).ok());
    } else {
      booted_last = std::move(*booted);
    }
  }
  std::printf("\ncopy-on-write clone to agent Check p50 %.0f ms (p90 %.0f); cold boot p50 %.0f ms (p90 %.0f); "
              "boot/clone p50 = %.1fx\n", Median(clone), P90(clone), Median(boot), P90(boot),
              Median(clone) > 0 ? Median(boot) / Median(clone) : 0.0);

  std::vector<SandboxVmPtr> idle;
  for (int i = 0; i < kIdleClones; ++i) {
    SandboxVmSpec cs;
    cs.id = "cow-idle-" + std::to_string(i);
    auto c = SandboxVm::Restore(cfg, cs, *tpl);
    ASSERT_OK(c);
    idle.push_back(std::move(*c));
  }
  struct stat sealed{};
  ASSERT_EQ(::fstat(tpl->sealed_ram->get(), &sealed), 0);
  const double sealed_mb = static_cast<double>(sealed.st_blocks) * 512 / 1e6;
  std::this_thread::sleep_for(kSettle);
  std::printf("\nmemory of %d idle copy-on-write clones of a %u MiB template (sealed RAM %.1f MB in shared memory), "
              "%lld s after the last was ready:\n", kIdleClones, tpl->memory_mib, sealed_mb,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kSettle).count()));
  std::vector<double> own, own_without_tcg, guest_written;
  long all_own = 0;
  for (auto& c : idle) {
    Mem q = MemOf(c->vmm_pid());
    Mem d = MemOf(PidFromFile(c->state_dir() + "/vsockd.pid"));
    own.push_back((q.own + d.own) / 1024.0);
    own_without_tcg.push_back((q.own + d.own - static_cast<long>(TcgCacheBytes(c->vmm_pid()).value_or(0) >> 10)) / 1024.0);
    all_own += q.own + d.own;
    guest_written.push_back(static_cast<double>(OwnBytesIn(c->vmm_pid(), "memfd:capsule-template-").value_or(0) >> 10) /
                            1024.0);
  }
  PrintMem("one clone's QEMU", MemOf(idle.front()->vmm_pid()));
  PrintMem("one clone's vsockd", MemOf(PidFromFile(idle.front()->state_dir() + "/vsockd.pid")));
  std::printf("  per clone, its own (QEMU + capsule-vsockd; QEMU's includes TCG's translation cache): "
              "p50 %.1f MB, max %.1f MB; without TCG's translation cache (absent under KVM) p50 %.1f MB\n",
              Median(own), *std::max_element(own.begin(), own.end()), Median(own_without_tcg));
  std::printf("  of that, the guest pages a clone wrote (its copies of template pages): p50 %.1f MB\n",
              Median(guest_written));
  std::printf("  %d clones: %.1f MB of their own + the template's sealed RAM once (%.1f MB of shared memory)"
              " = %.1f MB\n", kIdleClones, all_own / 1024.0, sealed_mb, all_own / 1024.0 + sealed_mb);
  std::fflush(stdout);
  ReportMemory(*booted_last, "booted VM (dense, same run)", cfg.guest.default_memory_mib);
  for (auto& c : idle) EXPECT_OK(c->Stop(milliseconds(10000)));
  idle.clear();
  ASSERT_OK(booted_last->Stop(milliseconds(10000)));
  EXPECT_OK(RemoveTemplate(cfg, tpl->dir));
  EXPECT_TRUE((*env)->Leftovers().empty());
}

}  // namespace
}  // namespace capsule::vm
