// Entry point of containerd-shim-capsule-v2: parses the command line and
// runs `start`, `delete` or the daemon. main() is one call to Main().
#pragma once

#include "shim/launcher/hooks.h"

namespace capsule::shim::launcher {

inline constexpr const char* kShimName = "containerd-shim-capsule-v2";
// Upper bound on the runtime options read from start's stdin.
inline constexpr size_t kMaxOptionsBytes = 1 << 20;

// Returns the process exit code: 0 ok, 1 failure, 2 bad command line
// (Go's flag package convention).
int Main(int argc, char** argv, const Hooks& hooks);

}  // namespace capsule::shim::launcher
