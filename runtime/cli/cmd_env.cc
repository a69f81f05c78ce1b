// `capsule-runtime env`: the effective configuration, defaults filled in;
// with --json, that and what this host offers (the checks of `check`), for
// bug reports and for tools.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/cli/command.h"
#include "runtime/cli/host_check.h"
#include "runtime/common/version.h"

namespace capsule::cli {
namespace {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk: return "ok";
    case Verdict::kWarn: return "warn";
    case Verdict::kFail: return "fail";
  }
  return "unknown";
}

int RunEnvJson(const GlobalFlags& flags, const config::Config& cfg) {
  HostReport report = CheckHost(cfg);
  nlohmann::json checks = nlohmann::json::array();
  for (const CheckItem& i : report.items)
    checks.push_back({{"name", i.name}, {"verdict", VerdictName(i.verdict)}, {"detail", i.detail}});
  nlohmann::json out = {
      {"version", kVersion},
      {"config_path", flags.config_path},
      {"config", config::ToJson(cfg)},
      {"host", {{"checks", checks}, {"warnings", report.warnings}, {"can_run_pods", report.can_run_pods()},
                {"summary", report.Summary()}}},
  };
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

Command AddEnvCommand(CLI::App& parent, const GlobalFlags& flags) {
  Command c;
  c.app = parent.add_subcommand("env", "print the effective configuration (--json: with the host's checks)");
  auto json = std::make_shared<bool>(false);
  c.app->add_flag("--json", *json, "JSON: the configuration, the version and what this host offers");
  c.run = [&flags, json] {
    auto cfg = LoadConfigFor(flags, "env");
    if (!cfg.ok()) return 1;
    if (*json) return RunEnvJson(flags, *cfg);
    std::printf("# effective configuration from %s\n%s", flags.config_path.c_str(), config::ToYaml(*cfg).c_str());
    return 0;
  };
  return c;
}

}  // namespace capsule::cli
