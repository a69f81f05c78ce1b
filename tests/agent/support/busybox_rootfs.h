// Test container material shared by the engine tests and the gRPC container
// API tests: a busybox root filesystem made from the host's static busybox,
// and the OCI spec containerd's CRI plugin would write (trimmed) for it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::agent::testing {

// Fills `dir` (existing) with /bin/busybox, its applet links, /etc/passwd
// and the usual empty mount points. Mode 0755 so it works as "/".
Status BuildBusyboxRootfs(const std::string& dir);

// A containerd-shaped spec running `args` in `rootfs` (root.path).
nlohmann::json DefaultSpec(const std::vector<std::string>& args, const std::string& rootfs);

}  // namespace capsule::agent::testing
