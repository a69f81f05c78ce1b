// `capsule-runtime pool ...`: the warm pool. `serve` runs capsule-poold's
// loop in this process; status (--json), resize and drain ask the daemon at
// pool.socket.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/cli/command.h"
#include "runtime/pool/pool_client.h"
#include "runtime/pool/pool_daemon.h"

namespace capsule::cli {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kCallTimeout{5000};
// Drain waits for boots in flight: a cold boot under TCG.
constexpr milliseconds kDrainTimeout{180000};

int64_t TemplateAgeSeconds(const pool::ShapeStatus& sh) {
  if (sh.template_key.empty()) return 0;
  const auto now = std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  return (now.count() - sh.template_created_unix_ms) / 1000;
}

// One line on how a shape refills: from its template (key, age, clone
// times) or by boot, and why not by template when one is wanted.
void PrintRefill(const pool::ShapeStatus& sh) {
  if (sh.refill == "template") {
    std::printf("  refill: template %s (age %llds, built in %.0f ms); clones %u, p50 %.0f ms, last %.0f ms, %u failed\n",
                sh.template_key.c_str(), static_cast<long long>(TemplateAgeSeconds(sh)), sh.template_build_ms,
                sh.clones, sh.clone_p50_ms, sh.clone_last_ms, sh.clone_failures);
  } else {
    std::printf("  refill: boot%s; boots %u, p50 %.0f ms, last %.0f ms\n",
                sh.template_building ? " (template being built)" : "", sh.boots, sh.boot_p50_ms, sh.boot_last_ms);
  }
  if (!sh.template_last_failure.empty())
    std::printf("  last template failure (%u build(s) failed, %u clone(s)): %s\n", sh.template_failures,
                sh.clone_failures, sh.template_last_failure.c_str());
}

nlohmann::json ToJson(const pool::PoolStatus& s) {
  nlohmann::json j = {{"state_dir", s.state_dir},     {"max_parallel_boots", s.max_parallel_boots},
                      {"draining", s.draining},       {"accelerator", s.accelerator},
                      {"ksm", s.ksm},                 {"shapes", nlohmann::json::array()}};
  for (const auto& sh : s.shapes) {
    j["shapes"].push_back({{"key", sh.key},
                           {"vcpus", sh.shape.vcpus},
                           {"memory_mib", sh.shape.memory_mib},
                           {"target", sh.target},
                           {"ready", sh.ready},
                           {"booting", sh.booting},
                           {"claimed", sh.claimed},
                           {"boots", sh.boots},
                           {"boot_failures", sh.boot_failures},
                           {"last_failure", sh.last_failure},
                           {"boot_p50_ms", sh.boot_p50_ms},
                           {"boot_last_ms", sh.boot_last_ms},
                           {"idle_vm_rss_bytes", sh.idle_vm_rss_bytes},
                           {"idle_vm_own_bytes", sh.idle_vm_own_bytes},
                           {"device_set", sh.device_set},
                           {"template_shared_bytes", sh.template_shared_bytes},
                           {"backoff_ms", sh.backoff_ms},
                           {"refills_held_back", sh.refills_held_back},
                           {"refill", sh.refill},
                           {"template", {{"key", sh.template_key},
                                         {"created_unix_ms", sh.template_created_unix_ms},
                                         {"age_s", TemplateAgeSeconds(sh)},
                                         {"build_ms", sh.template_build_ms},
                                         {"building", sh.template_building},
                                         {"builds", sh.template_builds},
                                         {"failures", sh.template_failures},
                                         {"last_failure", sh.template_last_failure}}},
                           {"clones", sh.clones},
                           {"clone_failures", sh.clone_failures},
                           {"clone_p50_ms", sh.clone_p50_ms},
                           {"clone_last_ms", sh.clone_last_ms}});
  }
  return j;
}

void PrintStatus(const pool::PoolStatus& s) {
  std::printf("pool: state %s, %u boot(s) at once, %s, KSM %s%s\n", s.state_dir.c_str(), s.max_parallel_boots,
              s.accelerator.c_str(), s.ksm.empty() ? "absent" : s.ksm.c_str(), s.draining ? ", DRAINING" : "");
  std::printf("%-16s %-16s %6s %5s %7s %7s %8s %10s %10s %10s\n", "SHAPE", "SIZE", "TARGET", "READY", "BOOTING",
              "CLAIMED", "FAILURES", "BOOT P50", "BOOT LAST", "IDLE RSS");
  for (const auto& sh : s.shapes) {
    std::printf("%-16s %-16s %6u %5u %7u %7u %8u %8.0fms %8.0fms %8.1fMB\n", sh.key.c_str(),
                pool::Describe(sh.shape).c_str(), sh.target, sh.ready, sh.booting, sh.claimed, sh.boot_failures,
                sh.boot_p50_ms, sh.boot_last_ms, static_cast<double>(sh.idle_vm_rss_bytes) / 1e6);
    PrintRefill(sh);
    if (sh.refills_held_back > 0)
      std::printf("  %u refill(s) held back while claimed VMs' pods start\n", sh.refills_held_back);
    std::printf("  device set %s: an idle VM's own memory %.1f MB%s\n", sh.device_set.c_str(),
                static_cast<double>(sh.idle_vm_own_bytes) / 1e6,
                sh.template_shared_bytes == 0
                    ? ""
                    : fmt::format(", the template's RAM shared by its clones {:.1f} MB",
                                  static_cast<double>(sh.template_shared_bytes) / 1e6).c_str());
    if (!sh.last_failure.empty())
      std::printf("  last boot failure (back-off %llu ms): %s\n", static_cast<unsigned long long>(sh.backoff_ms),
                  sh.last_failure.c_str());
  }
}

}  // namespace

std::vector<Command> AddPoolCommands(CLI::App& parent, const GlobalFlags& flags) {
  CLI::App* p = parent.add_subcommand("pool", "the warm VM pool (capsule-poold)");
  p->require_subcommand(1);
  std::vector<Command> out;

  CLI::App* serve = p->add_subcommand("serve", "run the pool daemon in this process (as capsule-poold does)");
  out.push_back({serve, [&flags] {
                   auto cfg = LoadConfigFor(flags, "pool serve");
                   return cfg.ok() ? pool::RunPoolDaemon(*cfg) : 1;
                 }});

  auto json = std::make_shared<bool>(false);
  CLI::App* status = p->add_subcommand("status", "per shape: ready, booting, claimed, boot times, failures, memory");
  status->add_flag("--json", *json, "print JSON");
  out.push_back({status, [&flags, json] {
                   auto cfg = LoadConfigFor(flags, "pool status");
                   if (!cfg.ok()) return 1;
                   auto st = pool::PoolClient::Create(cfg->pool.socket)->GetStatus(kCallTimeout);
                   if (!st.ok()) return Fail("pool status", st.status());
                   if (*json) {
                     std::printf("%s\n", ToJson(*st).dump(2).c_str());
                   } else {
                     PrintStatus(*st);
                   }
                   return 0;
                 }});

  auto size = std::make_shared<uint32_t>(0);
  CLI::App* resize = p->add_subcommand("resize", "set the ready VMs kept per shape");
  resize->add_option("size", *size, "VMs per shape (0 empties the pool)")->required();
  out.push_back({resize, [&flags, size] {
                   auto cfg = LoadConfigFor(flags, "pool resize");
                   if (!cfg.ok()) return 1;
                   Status st = pool::PoolClient::Create(cfg->pool.socket)->Resize(*size, kCallTimeout);
                   if (!st.ok()) return Fail("pool resize", st);
                   std::printf("pool: keeping %u ready VM(s) per shape\n", *size);
                   return 0;
                 }});

  CLI::App* drain = p->add_subcommand("drain", "stop every idle VM; the pool stays empty until resize");
  out.push_back({drain, [&flags] {
                   auto cfg = LoadConfigFor(flags, "pool drain");
                   if (!cfg.ok()) return 1;
                   auto n = pool::PoolClient::Create(cfg->pool.socket)->Drain(kDrainTimeout);
                   if (!n.ok()) return Fail("pool drain", n.status());
                   std::printf("pool: drained, %u idle VM(s) stopped\n", *n);
                   return 0;
                 }});
  return out;
}

}  // namespace capsule::cli
