// capsule-runtime's command tree: global flags, then one subcommand per
// file (cmd_*.cc). Run() parses argv and runs the command that was chosen.
#include "runtime/cli/cli.h"

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/cli/command.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/version.h"

namespace capsule::cli {

Result<config::Config> LoadConfigFor(const GlobalFlags& flags, std::string_view command) {
  auto cfg = config::LoadFile(flags.config_path);
  if (!cfg.ok()) {
    Fail(command, cfg.status());
    return cfg.status();
  }
  log::SetLevel(cfg->runtime.log_level);
  if (!flags.log_level.empty()) {
    auto level = log::ParseLevel(flags.log_level);
    if (level) log::SetLevel(*level);
  }
  return cfg;
}

int Fail(std::string_view command, const Status& status, int code) {
  std::fprintf(stderr, "capsule-runtime %.*s: %s\n", static_cast<int>(command.size()), command.data(),
               status.message().c_str());
  return code;
}

namespace {

// Run from the build tree (build/runtime/cli/capsule-runtime), find
// capsule-vsockd where that tree builds it; installed, both sit in bin/ and
// the vsock library finds it next to us anyway.
void FindVsockdInBuildTree() {
  if (std::getenv("CAPSULE_VSOCKD") != nullptr) return;
  auto self = SelfExePath();
  if (!self.ok()) return;
  std::string dir = *self;
  dir.resize(dir.rfind('/'));
  char real[PATH_MAX];
  std::string candidate = dir + "/../vsock/capsule-vsockd";
  if (::realpath(candidate.c_str(), real) != nullptr && ::access(real, X_OK) == 0) ::setenv("CAPSULE_VSOCKD", real, 0);
}

// `--version` on every subcommand too, as `--help` is.
void AddVersionFlagEverywhere(CLI::App& app, const std::string& version) {
  for (CLI::App* sub : app.get_subcommands({})) {
    sub->set_version_flag("--version", version);
    AddVersionFlagEverywhere(*sub, version);
  }
}

}  // namespace

int Run(int argc, char** argv) {
  FindVsockdInBuildTree();
  CLI::App app{"capsule-runtime: administer Capsule, the containerd shim that runs pods in microVMs"};
  app.set_version_flag("--version", std::string("capsule-runtime ") + kVersion);
  app.require_subcommand(1);
  GlobalFlags flags;
  app.add_option("--config", flags.config_path, "configuration file")->capture_default_str();
  app.add_option("--log-level", flags.log_level, "trace|debug|info|warn|error (default: the config's)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));

  std::vector<Command> commands = {AddEnvCommand(app, flags), AddCheckCommand(app, flags), AddPsCommand(app, flags),
                                   AddExecCommand(app, flags)};
  for (Command& c : AddVmCommands(app, flags)) commands.push_back(std::move(c));
  for (Command& c : AddPoolCommands(app, flags)) commands.push_back(std::move(c));
  for (Command& c : AddInstallCommands(app, flags)) commands.push_back(std::move(c));
  for (Command& c : AddMetricsCommands(app, flags)) commands.push_back(std::move(c));
  auto* version = app.add_subcommand("version", "print the version");
  AddVersionFlagEverywhere(app, std::string("capsule-runtime ") + kVersion);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (version->parsed()) {
    std::printf("capsule-runtime %s\n", kVersion);
    return 0;
  }
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return 2;
}

}  // namespace capsule::cli
