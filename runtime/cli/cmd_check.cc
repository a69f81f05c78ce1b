// `capsule-runtime check`: can this host run pods, and how. One line per
// item ([ok] / [warn] / [FAIL] with the reason), loud warnings, then a
// one-line verdict; exits 1 when the host cannot run pods.
#include <cstdio>

#include "runtime/cli/command.h"
#include "runtime/cli/host_check.h"

namespace capsule::cli {
namespace {

const char* Tag(Verdict v) {
  switch (v) {
    case Verdict::kOk: return "[ok]  ";
    case Verdict::kWarn: return "[warn]";
    case Verdict::kFail: return "[FAIL]";
  }
  return "[?]   ";
}

int RunCheck(const GlobalFlags& flags) {
  auto cfg = LoadConfigFor(flags, "check");
  if (!cfg.ok()) return 1;
  std::printf("capsule-runtime check (config %s)\n", flags.config_path.c_str());
  std::fflush(stdout);
  HostReport report = CheckHost(*cfg);
  for (const CheckItem& i : report.items) std::printf("%s %-15s %s\n", Tag(i.verdict), i.name.c_str(), i.detail.c_str());
  for (const std::string& w : report.warnings) std::printf("!!! WARNING: %s !!!\n", w.c_str());
  std::printf("verdict: %s\n", report.Summary().c_str());
  return report.can_run_pods() ? 0 : 1;
}

}  // namespace

Command AddCheckCommand(CLI::App& parent, const GlobalFlags& flags) {
  Command c;
  c.app = parent.add_subcommand("check", "check that this host can run Capsule pods (accelerator, QEMU, vsock, "
                                         "guest image, virtiofsd)");
  c.run = [&flags] { return RunCheck(flags); };
  return c;
}

}  // namespace capsule::cli
