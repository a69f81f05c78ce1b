// `capsule-runtime env`: the effective configuration, defaults filled in.
#include <cstdio>

#include "runtime/cli/command.h"

namespace capsule::cli {

Command AddEnvCommand(CLI::App& parent, const GlobalFlags& flags) {
  Command c;
  c.app = parent.add_subcommand("env", "print the effective configuration");
  c.run = [&flags] {
    auto cfg = LoadConfigFor(flags, "env");
    if (!cfg.ok()) return 1;
    std::printf("# effective configuration from %s\n%s", flags.config_path.c_str(), config::ToYaml(*cfg).c_str());
    return 0;
  };
  return c;
}

}  // namespace capsule::cli
