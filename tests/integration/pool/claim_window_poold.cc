// A test build of capsule-poold (never installed) for the claim window:
// --die-in-claim SIGKILLs the daemon right after a claim marked its VM
// claimed and before the hand-over and reply, which is what a crash there
// leaves; --claim-grace-ms and --scan-interval-ms shorten the reaping of
// such a VM so a test need not wait the production 30 s.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "runtime/common/logging.h"
#include "runtime/common/version.h"
#include "runtime/config/config.h"
#include "runtime/pool/pool_daemon.h"

int main(int argc, char** argv) {
  using namespace capsule;
  CLI::App app{"claim_window_poold: capsule-poold with a crash inside the claim window (tests only)"};
  app.set_version_flag("--version", std::string("claim_window_poold ") + kVersion);
  std::string config_path;
  bool die_in_claim = false;
  int64_t grace_ms = 30000, scan_ms = 5000;
  app.add_option("--config", config_path, "configuration file")->required();
  app.add_flag("--die-in-claim", die_in_claim, "SIGKILL itself once a claim has marked its VM claimed");
  app.add_option("--claim-grace-ms", grace_ms, "reap a claimed, unadopted VM after this long");
  app.add_option("--scan-interval-ms", scan_ms, "how often the state dir is scanned");
  CLI11_PARSE(app, argc, argv);
  auto cfg = config::LoadFile(config_path);
  if (!cfg.ok()) {
    std::fprintf(stderr, "claim_window_poold: %s\n", cfg.status().message().c_str());
    return 1;
  }
  log::SetLevel(cfg->runtime.log_level);
  pool::WarmPoolOptions o;
  o.config = *cfg;
  o.claim_grace = std::chrono::milliseconds(grace_ms);
  o.scan_interval = std::chrono::milliseconds(scan_ms);
  if (die_in_claim) {
    o.after_claim_recorded = [](const std::string& vm_id) {
      std::fprintf(stderr, "claim_window_poold: dying inside the claim of %s\n", vm_id.c_str());
      ::raise(SIGKILL);
    };
  }
  return pool::RunPoolDaemon(std::move(o));
}
