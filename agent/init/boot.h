// PID 1's boot duties, in order: root off the initramfs, /proc, kernel
// command line, the other API filesystems, console, cgroups, hostname,
// loopback, kernel modules. Only what makes the agent unable to work is
// fatal (the caller powers off); the rest is logged and the boot goes on.
#pragma once

#include <vector>

#include "agent/config/settings.h"
#include "agent/init/cgroups.h"
#include "agent/modules/loader.h"
#include "runtime/common/status.h"

namespace capsule::agent::init {

struct BootReport {
  config::BootSettings settings;
  modules::BootLoadReport modules;
  ControllerReport cgroups;
  std::vector<std::string> mounted;  // early mount targets
};

Result<BootReport> RunBootDuties(modules::KernelModuleLoader& loader);

}  // namespace capsule::agent::init
