// capsule-poold: the warm VM pool daemon (also `capsule-runtime pool serve`).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "runtime/common/logging.h"
#include "runtime/common/version.h"
#include "runtime/config/config.h"
#include "runtime/pool/pool_daemon.h"

int main(int argc, char** argv) {
  using namespace capsule;
  CLI::App app{"capsule-poold: keeps booted, paused microVMs ready so that a Capsule pod starts by claiming one"};
  app.set_version_flag("--version", std::string("capsule-poold ") + kVersion);
  std::string config_path = config::kDefaultPath;
  std::string level;
  app.add_option("--config", config_path, "configuration file (pool.size, pool.socket, guest.*)")->capture_default_str();
  app.add_option("--log-level", level, "trace|debug|info|warn|error (default: the config's)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  CLI11_PARSE(app, argc, argv);
  auto cfg = config::LoadFile(config_path);
  if (!cfg.ok()) {
    std::fprintf(stderr, "capsule-poold: %s\n", cfg.status().message().c_str());
    return 1;
  }
  log::SetLevel(cfg->runtime.log_level);
  if (auto l = log::ParseLevel(level); !level.empty() && l) log::SetLevel(*l);
  return pool::RunPoolDaemon(*cfg);
}
