// `capsule-runtime ps`: the pods running in microVMs on this host, each with
// its VM, VMM pid, accelerator, size, the VMM's resident memory and CPU,
// and how it started (claimed from the pool or cold-booted, in how long).
// Read from each VM's vm.json and pod.json; takes over nothing.
#include <cstdio>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/cli/command.h"
#include "runtime/vm/vm_listing.h"

namespace capsule::cli {
namespace {

std::string PodName(const vm::VmListing& l) {
  if (!l.pod) return "-";
  if (l.pod->pod_name.empty()) return l.pod->ns + "/" + l.pod->sandbox_id;
  return l.pod->pod_namespace + "/" + l.pod->pod_name;
}

std::string Age(int64_t started_unix_ms) {
  const int64_t now_s = static_cast<int64_t>(std::time(nullptr));
  const int64_t s = std::max<int64_t>(0, now_s - started_unix_ms / 1000);
  if (s < 120) return fmt::format("{}s", s);
  if (s < 7200) return fmt::format("{}m", s / 60);
  return fmt::format("{}h", s / 3600);
}

nlohmann::json ToJson(const vm::VmListing& l) {
  nlohmann::json j = {{"vm_id", l.id},           {"state_dir", l.state_dir},   {"vmm_pid", l.vmm_pid},
                      {"vmm_running", l.vmm_running}, {"accelerator", l.accelerator}, {"vcpus", l.vcpus},
                      {"memory_mib", l.memory_mib}, {"vmm_rss_bytes", l.vmm_rss_bytes},
                      {"vmm_cpu_seconds", l.vmm_cpu_seconds}};
  if (!l.problem.empty()) j["problem"] = l.problem;
  if (!l.pod_problem.empty()) j["pod_problem"] = l.pod_problem;
  if (l.pod) {
    j["pod"] = {{"sandbox_id", l.pod->sandbox_id}, {"namespace", l.pod->ns},
                {"pod_name", l.pod->pod_name},     {"pod_namespace", l.pod->pod_namespace},
                {"shim_pid", l.pod->shim_pid},     {"started_unix_ms", l.pod->started_unix_ms},
                {"claimed", l.pod->claimed},       {"vm_ms", l.pod->vm_ms},
                {"setup_ms", l.pod->setup_ms}};
  }
  return j;
}

int RunPs(const GlobalFlags& flags, bool all, bool json) {
  auto cfg = LoadConfigFor(flags, "ps");
  if (!cfg.ok()) return 1;
  auto vms = vm::ListVms(*cfg);
  if (!vms.ok()) return Fail("ps", vms.status());
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& l : *vms)
      if (all || l.pod) out.push_back(ToJson(l));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-40s %-24s %-8s %-5s %-5s %-7s %-9s %-8s %-18s %s\n", "POD", "VM", "PID", "ACCEL", "VCPUS", "MEMORY",
              "VMM RSS", "VMM CPU", "START", "AGE");
  for (const auto& l : *vms) {
    if (!all && !l.pod) continue;
    if (!l.problem.empty()) {
      std::printf("%-40s %-24s broken: %s\n", PodName(l).c_str(), l.id.c_str(), l.problem.c_str());
      continue;
    }
    const std::string start = l.pod ? fmt::format("{} {:.0f} ms", l.pod->claimed ? "claimed" : "booted", l.pod->vm_ms)
                                    : (l.pod_problem.empty() ? "idle (pool)" : "pod.json unreadable");
    std::printf("%-40s %-24s %-8d %-5s %-5u %-7s %-9s %-8s %-18s %s\n", PodName(l).c_str(), l.id.c_str(), l.vmm_pid,
                l.vmm_running ? l.accelerator.c_str() : "exit", l.vcpus, fmt::format("{}M", l.memory_mib).c_str(),
                fmt::format("{:.1f}M", static_cast<double>(l.vmm_rss_bytes) / (1 << 20)).c_str(),
                fmt::format("{:.1f}s", l.vmm_cpu_seconds).c_str(), start.c_str(),
                l.pod ? Age(l.pod->started_unix_ms).c_str() : "-");
  }
  return 0;
}

}  // namespace

Command AddPsCommand(CLI::App& parent, const GlobalFlags& flags) {
  Command c;
  c.app = parent.add_subcommand("ps", "list the pods in microVMs on this host: VM, VMM pid, accelerator, memory");
  auto all = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  c.app->add_flag("-a,--all", *all, "also VMs that serve no pod (idle pool VMs, boots in progress)");
  c.app->add_flag("--json", *json, "print JSON instead of a table");
  c.run = [&flags, all, json] { return RunPs(flags, *all, *json); };
  return c;
}

}  // namespace capsule::cli
