// capsule-poold's main loop, shared by the capsule-poold binary and
// `capsule-runtime pool serve`: start the WarmPool, serve the Pool API on
// `pool.socket` (mode 0600, in a directory only root can write to), and on SIGTERM or
// SIGINT stop serving and drain, so a stopped daemon leaves nothing.
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "runtime/config/config.h"
#include "runtime/pool/warm_pool.h"

namespace capsule::pool {

// Makes the socket's directory (0700) or checks the one there: ours, and
// writable by no one else, who could otherwise swap the socket; then
// removes a stale socket. ALREADY_EXISTS when a daemon answers there.
Status PreparePoolSocket(const std::string& path);

// Returns the process exit code.
int RunPoolDaemon(const config::Config& config);
// The same with every pool option (tests: a short claim grace, a seam).
int RunPoolDaemon(WarmPoolOptions options);

}  // namespace capsule::pool
