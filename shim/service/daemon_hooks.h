// The shim's two hooks into the launcher (shim/launcher/hooks.h):
//   Serve    the daemon: load the config, then serve containerd's Task
//            service on the inherited socket until Shutdown or a signal;
//   Cleanup  `delete` after a dead shim: stop the VM it left (adopted from
//            its state dir) and undo its host mounts.
// The VM provider is injected: shim/cmd wires the real one.
#pragma once

#include <functional>
#include <memory>

#include "runtime/config/config.h"
#include "shim/launcher/hooks.h"
#include "shim/pod/vm_provider.h"

namespace capsule::shim::service {

using VmProviderFactory = std::function<pod::VmProviderPtr(const config::Config& config)>;

// How long queued events may take to reach containerd when the shim exits.
inline constexpr std::chrono::milliseconds kEventFlushTimeout{5000};
// A shim with no task left exits by itself after this long, even when
// containerd never sends Shutdown (it died, or its call was lost); and a
// shim that was started but never given a task, after the longer one.
inline constexpr std::chrono::seconds kIdleExitAfterLastTask{10};
inline constexpr std::chrono::seconds kIdleExitWithoutTask{60};
// Tear-down (VMs, server, event queue) past this long is stuck: the daemon
// logs where and exits anyway, so a hung call never keeps a shim alive.
inline constexpr std::chrono::seconds kShutdownDeadline{30};

struct LoadedConfig {
  config::Config config;  // the defaults when loading failed
  std::string path;       // what was read ("" = built-in defaults)
  Status error;           // why loading failed
};

// `path` empty means /etc/capsule/config.yaml, whose absence is not an
// error (the built-in defaults apply); a named file must exist.
LoadedConfig LoadConfig(const std::string& path);

Status Serve(launcher::DaemonContext& ctx, const VmProviderFactory& make_vms);
Result<uint32_t> Cleanup(const launcher::CleanupContext& ctx, const VmProviderFactory& make_vms);


}  // namespace capsule::shim::service
