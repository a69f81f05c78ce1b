// The long-lived shim daemon `start` execs: becomes a child subreaper,
// starts the process-wide Reaper, logs into the bundle's `log` FIFO (which
// containerd copies into its own log), turns SIGTERM/SIGINT into a shutdown
// request, runs the serve hook on the inherited socket, and removes the
// socket when it exits.
#pragma once

#include "shim/launcher/flags.h"
#include "shim/launcher/hooks.h"

namespace capsule::shim::launcher {

// Returns the process exit code (0 after a clean shutdown).
int RunDaemon(const ShimFlags& flags, const ServeFn& serve);

}  // namespace capsule::shim::launcher
