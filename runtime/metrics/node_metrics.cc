// See node_metrics.h. One pass over /proc finds each VM's host processes
// by the VM dir on their command line (QEMU's console fd, virtiofsd's and
// capsule-vsockd's sockets); the shim is pod.json's pid, checked to be a
// shim still.
#include "runtime/metrics/node_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "runtime/agentclient/call_stats.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/version.h"
#include "runtime/host/proc_stat.h"
#include "runtime/host/process_usage.h"
#include "runtime/metrics/prometheus_text.h"
#include "runtime/pool/pool_client.h"
#include "runtime/vm/guest_stats.h"
#include "runtime/vm/vm_listing.h"

namespace capsule::metrics {
namespace {

const log::Logger kNodeMetricsLog("metrics");

// Guests asked for their memory and load at once during a scrape.
constexpr size_t kGuestQueriesAtOnce = 8;

struct HostProcess {
  pid_t pid;
  std::string comm;
  std::string cmdline;
};

std::vector<HostProcess> ScanProcesses() {
  std::vector<HostProcess> out;
  for (const std::string& name : ListDir("/proc")) {
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    auto args = ReadCmdline(pid);
    auto comm = ReadFile("/proc/" + name + "/comm");
    if (!args.ok() || !comm.ok() || args->empty()) continue;
    std::string c;
    for (const std::string& a : *args) c += (c.empty() ? "" : " ") + a;
    out.push_back({pid, comm->substr(0, comm->find('\n')), std::move(c)});
  }
  return out;
}

// The process kinds a VM has on the host, by comm.
std::string Kind(const std::string& comm) {
  if (comm.rfind("qemu-system", 0) == 0) return "qemu";
  if (comm.rfind("virtiofsd", 0) == 0) return "virtiofsd";
  if (comm.rfind("capsule-vsockd", 0) == 0) return "vsockd";
  if (comm == "capsule-shimd") return "shim";  // the pod's daemon (comm: 15 bytes at most)
  return "";
}

Labels VmLabels(const vm::VmListing& l) {
  Labels labels = {{"vm_id", l.id}};
  if (l.pod) {
    labels.insert(labels.end(), {{"sandbox_id", l.pod->sandbox_id},
                                 {"pod", l.pod->pod_name},
                                 {"namespace", l.pod->pod_namespace},
                                 {"containerd_namespace", l.pod->ns}});
  }
  return labels;
}

Labels With(Labels l, std::string key, std::string value) {
  l.emplace_back(std::move(key), std::move(value));
  return l;
}

void CollectPool(const config::Config& config, const CollectOptions& o, PrometheusText& t) {
  t.Family("capsule_pool_up", "gauge", "1 when capsule-poold answered this scrape");
  if (config.pool.size == 0 || ::access(config.pool.socket.c_str(), F_OK) != 0) {
    t.Sample("capsule_pool_up", {}, 0);
    return;
  }
  auto st = pool::PoolClient::Create(config.pool.socket)->GetStatus(o.pool_timeout);
  t.Sample("capsule_pool_up", {}, st.ok() ? 1 : 0);
  if (!st.ok()) {
    kNodeMetricsLog.Warn("pool status from {}: {}", config.pool.socket, st.status().ToString());
    return;
  }
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const pool::ShapeStatus&);
  };
  static const Series kSeries[] = {
      {"capsule_pool_target", "gauge", "VMs the pool keeps ready for the shape", [](const pool::ShapeStatus& s) { return double(s.target); }},
      {"capsule_pool_ready", "gauge", "ready (booted, paused) VMs", [](const pool::ShapeStatus& s) { return double(s.ready); }},
      {"capsule_pool_booting", "gauge", "VMs being booted or cloned", [](const pool::ShapeStatus& s) { return double(s.booting); }},
      {"capsule_pool_claimed_total", "counter", "VMs handed to pods", [](const pool::ShapeStatus& s) { return double(s.claimed); }},
      {"capsule_pool_boots_total", "counter", "VMs cold-booted for the pool", [](const pool::ShapeStatus& s) { return double(s.boots); }},
      {"capsule_pool_boot_failures_total", "counter", "failed pool boots", [](const pool::ShapeStatus& s) { return double(s.boot_failures); }},
      {"capsule_pool_clones_total", "counter", "VMs restored from the shape's template", [](const pool::ShapeStatus& s) { return double(s.clones); }},
      {"capsule_pool_clone_failures_total", "counter", "failed clones", [](const pool::ShapeStatus& s) { return double(s.clone_failures); }},
      {"capsule_pool_boot_p50_seconds", "gauge", "median pool boot time", [](const pool::ShapeStatus& s) { return s.boot_p50_ms / 1000; }},
      {"capsule_pool_clone_p50_seconds", "gauge", "median clone time", [](const pool::ShapeStatus& s) { return s.clone_p50_ms / 1000; }},
      {"capsule_pool_idle_vm_resident_bytes", "gauge", "QEMU RSS of an idle pooled VM", [](const pool::ShapeStatus& s) { return double(s.idle_vm_rss_bytes); }},
  };
  for (const Series& series : kSeries) {
    t.Family(series.name, series.type, series.help);
    for (const pool::ShapeStatus& s : st->shapes) {
      t.Sample(series.name,
               {{"shape", s.key}, {"vcpus", std::to_string(s.shape.vcpus)},
                {"memory_mib", std::to_string(s.shape.memory_mib)}, {"refill", s.refill}},
               series.value(s));
    }
  }
}

}  // namespace

std::string CollectNodeMetrics(const config::Config& config, const CollectOptions& o) {
  PrometheusText t;
  t.Family("capsule_build_info", "gauge", "the capsule-runtime version serving these metrics");
  t.Sample("capsule_build_info", {{"version", kVersion}}, 1);
  auto vms = vm::ListVms(config);
  if (!vms.ok()) {
    kNodeMetricsLog.Warn("list VMs: {}", vms.status().ToString());
    vms = std::vector<vm::VmListing>();
  }
  const std::vector<HostProcess> procs = ScanProcesses();

  t.Family("capsule_vm_info", "gauge", "one per VM in the state dir: its accelerator, size and role (pod or pool)");
  for (const auto& l : *vms) {
    t.Sample("capsule_vm_info",
             With(With(With(With(VmLabels(l), "accelerator", l.accelerator), "vcpus", std::to_string(l.vcpus)),
                       "memory_mib", std::to_string(l.memory_mib)),
                  "role", l.pod ? "pod" : "pool"),
             l.vmm_running ? 1 : 0);
  }
  t.Family("capsule_vm_start_seconds", "gauge", "how long the pod's VM took: claimed from the pool or cold-booted");
  for (const auto& l : *vms)
    if (l.pod) t.Sample("capsule_vm_start_seconds", With(VmLabels(l), "path", l.pod->claimed ? "claim" : "boot"), l.pod->vm_ms / 1000);
  t.Family("capsule_pod_setup_seconds", "gauge", "clock, RNG, CreateSandbox and network after the VM was there");
  for (const auto& l : *vms)
    if (l.pod) t.Sample("capsule_pod_setup_seconds", VmLabels(l), l.pod->setup_ms / 1000);

  // Host processes per VM.
  t.Family("capsule_vm_process_resident_bytes", "gauge", "resident memory of a VM's host processes, by process");
  std::vector<std::pair<Labels, double>> cpu;
  for (const auto& l : *vms) {
    std::map<std::string, ProcessUsageSample> by_kind;
    auto add = [&](pid_t pid, const std::string& kind) {
      auto u = ProcessUsage(pid);
      if (!u.ok()) return;
      by_kind[kind].rss_bytes += u->rss_bytes;
      by_kind[kind].cpu_seconds += u->cpu_seconds;
    };
    for (const HostProcess& p : procs) {
      const std::string kind = Kind(p.comm);
      if (kind.empty() || kind == "shim") continue;
      if (p.cmdline.find(l.state_dir + "/") != std::string::npos || p.pid == l.vmm_pid) add(p.pid, kind);
    }
    if (l.pod) {
      for (const HostProcess& p : procs)
        if (p.pid == l.pod->shim_pid && Kind(p.comm) == "shim") add(p.pid, "shim");
    }
    for (const auto& [kind, u] : by_kind) {
      t.Sample("capsule_vm_process_resident_bytes", With(VmLabels(l), "process", kind), static_cast<double>(u.rss_bytes));
      cpu.emplace_back(With(VmLabels(l), "process", kind), u.cpu_seconds);
    }
  }
  t.Family("capsule_vm_process_cpu_seconds_total", "counter", "CPU time of a VM's host processes, by process");
  for (const auto& [labels, seconds] : cpu) t.Sample("capsule_vm_process_cpu_seconds_total", labels, seconds);

  // The owner's agent call histograms (agent-calls.json, call_stats.h).
  t.Family("capsule_agent_rpc_duration_seconds", "histogram",
           "agent RPC latency seen by the VM's owner (the shim; the pool daemon while the VM idles), by RPC");
  std::vector<std::pair<Labels, uint64_t>> rpc_errors;
  for (const auto& l : *vms) {
    const std::string path = l.state_dir + "/" + agentclient::kCallStatsFile;
    auto text = ReadFile(path);
    if (!text.ok()) continue;
    auto stats = agentclient::CallStatsFromJson(*text, path);
    if (!stats.ok()) {
      kNodeMetricsLog.Warn("{}", stats.status().ToString());
      continue;
    }
    for (const auto& [rpc, r] : *stats) {
      const Labels base = With(VmLabels(l), "rpc", rpc);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < agentclient::kCallBuckets.size(); ++i) {
        cumulative += r.buckets[i];
        t.Sample("capsule_agent_rpc_duration_seconds_bucket", With(base, "le", fmt::format("{}", agentclient::kCallBuckets[i])),
                 static_cast<double>(cumulative));
      }
      t.Sample("capsule_agent_rpc_duration_seconds_bucket", With(base, "le", "+Inf"), static_cast<double>(r.count));
      t.Sample("capsule_agent_rpc_duration_seconds_sum", base, r.sum_seconds);
      t.Sample("capsule_agent_rpc_duration_seconds_count", base, static_cast<double>(r.count));
      rpc_errors.emplace_back(base, r.errors);
    }
  }
  t.Family("capsule_agent_rpc_errors_total", "counter", "agent RPCs that failed, by RPC");
  for (const auto& [labels, n] : rpc_errors) t.Sample("capsule_agent_rpc_errors_total", labels, static_cast<double>(n));

  if (o.guest) {
    struct Guest {
      Labels labels;
      Result<vm::GuestStats> stats;
    };
    std::vector<const vm::VmListing*> asked;
    for (const auto& l : *vms)
      if (l.pod && l.vmm_running) asked.push_back(&l);
    // A few guests at a time, so a scrape of a node whose guests do not
    // answer takes a few timeouts, not one per pod.
    std::vector<std::optional<Result<vm::GuestStats>>> answers(asked.size());
    std::atomic<size_t> next{0};
    std::vector<std::thread> workers;
    for (size_t w = 0; w < std::min(kGuestQueriesAtOnce, asked.size()); ++w) {
      workers.emplace_back([&] {
        for (size_t i = next++; i < asked.size(); i = next++)
          answers[i] = vm::ReadGuestStats(asked[i]->state_dir, o.guest_timeout);
      });
    }
    for (auto& worker : workers) worker.join();
    std::vector<Guest> guests;
    for (size_t i = 0; i < asked.size(); ++i) {
      if (!answers[i]->ok())
        kNodeMetricsLog.Warn("VM {}: guest stats: {}", asked[i]->id, answers[i]->status().ToString());
      guests.push_back({VmLabels(*asked[i]), std::move(*answers[i])});
    }
    t.Family("capsule_guest_up", "gauge", "1 when the pod's guest agent answered this scrape");
    for (const auto& g : guests) t.Sample("capsule_guest_up", g.labels, g.stats.ok() ? 1 : 0);
    t.Family("capsule_guest_memory_total_bytes", "gauge", "the guest kernel's MemTotal");
    for (const auto& g : guests)
      if (g.stats.ok()) t.Sample("capsule_guest_memory_total_bytes", g.labels, static_cast<double>(g.stats->mem_total_bytes));
    t.Family("capsule_guest_memory_available_bytes", "gauge", "the guest kernel's MemAvailable");
    for (const auto& g : guests)
      if (g.stats.ok())
        t.Sample("capsule_guest_memory_available_bytes", g.labels, static_cast<double>(g.stats->mem_available_bytes));
    t.Family("capsule_guest_load1", "gauge", "the guest's 1-minute load average");
    for (const auto& g : guests)
      if (g.stats.ok()) t.Sample("capsule_guest_load1", g.labels, g.stats->load1);
  }
  CollectPool(config, o, t);
  return t.text();
}

}  // namespace capsule::metrics
