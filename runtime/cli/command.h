// How capsule-runtime's commands plug into the CLI11 tree: each command file
// adds its subcommand and returns what to run when it was the one parsed.
// Commands print results on stdout, progress (logs) and errors on stderr,
// and return the process exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/config/config.h"

namespace capsule::cli {

// Flags every command shares; filled by CLI11 before a command runs.
struct GlobalFlags {
  std::string config_path = config::kDefaultPath;
  std::string log_level;  // "" = the config's runtime.log_level
};

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// Loads --config and applies the log level; on failure prints
// "capsule-runtime <cmd>: <error>" and returns the error.
Result<config::Config> LoadConfigFor(const GlobalFlags& flags, std::string_view command);
// "capsule-runtime <cmd>: <message>" on stderr; returns `code`.
int Fail(std::string_view command, const Status& status, int code = 1);

Command AddEnvCommand(CLI::App& parent, const GlobalFlags& flags);
Command AddCheckCommand(CLI::App& parent, const GlobalFlags& flags);
Command AddPsCommand(CLI::App& parent, const GlobalFlags& flags);
Command AddExecCommand(CLI::App& parent, const GlobalFlags& flags);
// `metrics` and its subcommands: serve, dump.
std::vector<Command> AddMetricsCommands(CLI::App& parent, const GlobalFlags& flags);
// `vm` and its subcommands: boot, ls, stop.
std::vector<Command> AddVmCommands(CLI::App& parent, const GlobalFlags& flags);
Command AddVmBootCommand(CLI::App& vm, const GlobalFlags& flags);
Command AddVmLsCommand(CLI::App& vm, const GlobalFlags& flags);
Command AddVmStopCommand(CLI::App& vm, const GlobalFlags& flags);
// `pool` and its subcommands: serve, status, resize, drain.
std::vector<Command> AddPoolCommands(CLI::App& parent, const GlobalFlags& flags);
// `install` and `uninstall`: the node installer (runtime/install).
std::vector<Command> AddInstallCommands(CLI::App& parent, const GlobalFlags& flags);

}  // namespace capsule::cli
