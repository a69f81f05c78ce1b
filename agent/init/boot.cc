// The boot sequence. Each step logs what it did so the serial log alone
// tells how far a failed boot got.
#include "agent/init/boot.h"

#include <fmt/format.h>
#include <unistd.h>

#include "agent/config/kernel_cmdline.h"
#include "agent/init/console.h"
#include "agent/init/mounts.h"
#include "agent/init/network.h"
#include "agent/init/power.h"
#include "agent/init/root.h"
#include "agent/modules/modprobe_helper.h"
#include "agent/modules/module_policy.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent::init {
namespace {

const log::Logger kBootLog("init");

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "-" : out;
}

Result<config::BootSettings> ReadSettings() {
  RETURN_IF_ERROR(MountOne(EarlyMounts(false).front()));  // /proc, for /proc/cmdline
  ASSIGN_OR_RETURN(std::string cmdline, ReadFile("/proc/cmdline"));
  config::BootSettings settings = config::SettingsFromCmdline(config::ParseKernelCmdline(cmdline));
  log::SetLevel(settings.log_level);
  kBootLog.Info("kernel command line: {}", cmdline);
  for (const auto& w : settings.warnings) kBootLog.Warn("{}", w);
  return settings;
}

// Steps whose failure leaves a usable agent: log and go on.
void SoftSteps(BootReport& report) {
  const auto& s = report.settings;
  if (Status st = CreateDevSymlinks(); !st.ok()) kBootLog.Warn("{}", st.message());
  if (Status st = DisableCtrlAltDel(); !st.ok()) kBootLog.Warn("{}", st.message());
  if (s.cgroups) {
    auto cg = EnableControllers(kCgroupRoot, DefaultControllers());
    if (cg.ok()) {
      report.cgroups = *cg;
      kBootLog.Info("cgroup2 controllers enabled: {} (unavailable: {})", Join(cg->enabled), Join(cg->unavailable));
      auto options = SuperOptionsOf(kCgroupRoot);
      if (options.ok()) kBootLog.Info("{} mounted with {}", kCgroupRoot, *options);
    } else {
      kBootLog.Error("cgroups: {}", cg.status().message());
    }
  }
  if (::sethostname(s.hostname.data(), s.hostname.size()) != 0) {
    kBootLog.Warn("{}", ErrnoStatus("sethostname " + s.hostname).message());
  }
  if (Status st = BringUpInterface("lo"); !st.ok()) kBootLog.Warn("loopback: {}", st.message());
}

void LoadModules(modules::KernelModuleLoader& loader, BootReport& report) {
  auto loaded = loader.LoadBootSet();
  if (!loaded.ok()) {
    kBootLog.Error("kernel modules: {}", loaded.status().message());
    return;
  }
  report.modules = std::move(loaded).value();
  const auto& m = report.modules;
  kBootLog.Info("kernel modules: {} loaded, {} already loaded, {} built in, {} failed", m.loaded.size(),
                m.already_loaded.size(), m.builtin.size(), m.failed.size());
  if (report.settings.scsi_disks) {
    Status st = loader.Load(std::vector<std::string>(guest_abi::kScsiDiskModules.begin(), guest_abi::kScsiDiskModules.end()));
    if (!st.ok()) kBootLog.Error("capsule.disks=scsi: {}", st.message());
  }
  if (!report.settings.extra_modules.empty()) {
    Status st = loader.Load(report.settings.extra_modules);
    if (!st.ok()) kBootLog.Error("capsule.modules: {}", st.message());
  }
}

}  // namespace

Result<BootReport> RunBootDuties(modules::KernelModuleLoader& loader) {
  EnsureConsole();
  RETURN_IF_ERROR_CTX(MakeRootPivotable(), "move root off the initramfs");
  BootReport report;
  ASSIGN_OR_RETURN(report.settings, ReadSettings());
  RETURN_IF_ERROR(MountEarlyFilesystems(report.settings.cgroups));
  EnsureConsole();
  for (const auto& m : EarlyMounts(report.settings.cgroups)) report.mounted.emplace_back(m.target);
  kBootLog.Info("mounted {}", Join(report.mounted));
  SoftSteps(report);
  LoadModules(loader, report);
  // Modules the image does not load at boot come on demand from here on,
  // those the allowlist names.
  const auto policy = modules::ModulePolicy::WithExtra(report.settings.allowed_modules);
  if (Status st = modules::WriteModulePolicy(policy); !st.ok())
    kBootLog.Warn("{}; modules on demand follow the built-in allowlist", st.message());
  if (Status st = modules::InstallModprobeHelper(); !st.ok()) kBootLog.Warn("{}", st.message());
  return report;
}

}  // namespace capsule::agent::init
