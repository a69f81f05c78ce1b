// The capsule-runtime commands: `env` prints the effective configuration,
// `version` the build. Further commands register here as their components land.
#include "runtime/cli/cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "runtime/common/logging.h"
#include "runtime/common/version.h"
#include "runtime/config/config.h"

namespace capsule::cli {
namespace {

int CmdEnv(const std::string& config_path) {
  auto cfg = config::LoadFile(config_path);
  if (!cfg.ok()) {
    std::fprintf(stderr, "capsule-runtime env: %s\n", cfg.status().message().c_str());
    return 1;
  }
  std::printf("# effective configuration from %s\n%s", config_path.c_str(), config::ToYaml(*cfg).c_str());
  return 0;
}

}  // namespace

int Run(int argc, char** argv) {
  CLI::App app{"capsule-runtime: administer Capsule, the containerd shim that runs pods in microVMs"};
  app.set_version_flag("--version", std::string("capsule-runtime ") + kVersion);
  app.require_subcommand(1);
  std::string config_path = config::kDefaultPath;
  app.add_option("--config", config_path, "configuration file")->capture_default_str();

  auto* env = app.add_subcommand("env", "print the effective configuration");
  auto* version = app.add_subcommand("version", "print the version");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (env->parsed()) return CmdEnv(config_path);
  if (version->parsed()) {
    std::printf("capsule-runtime %s\n", kVersion);
    return 0;
  }
  return 2;
}

}  // namespace capsule::cli
