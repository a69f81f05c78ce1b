// Entry point of containerd-shim-capsule-v2: parses the command line and
// runs `start`, `delete` or the daemon. main() is one call to Main().
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "shim/launcher/hooks.h"

namespace capsule::shim::launcher {

inline constexpr const char* kShimName = "containerd-shim-capsule-v2";
// The binary that serves the Task API, beside kShimName.
inline constexpr const char* kDaemonName = "capsule-shimd";
// Upper bound on the runtime options read from start's stdin.
inline constexpr size_t kMaxOptionsBytes = 1 << 20;

// Returns the process exit code: 0 ok, 1 failure, 2 bad command line
// (Go's flag package convention).
int Main(int argc, char** argv, const Hooks& hooks);

// `name` in the directory of this process's executable.
Result<std::string> BesideSelf(const std::string& name);

}  // namespace capsule::shim::launcher
