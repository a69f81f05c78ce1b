// capsule-poold's main loop, shared by the capsule-poold binary and
// `capsule-runtime pool serve`: start the WarmPool, serve the Pool API on
// `pool.socket` (mode 0600, in a root-only directory), and on SIGTERM or
// SIGINT stop serving and drain, so a stopped daemon leaves nothing.
#pragma once

#include "runtime/config/config.h"
#include "runtime/pool/warm_pool.h"

namespace capsule::pool {

// Returns the process exit code.
int RunPoolDaemon(const config::Config& config);
// The same with every pool option (tests: a short claim grace, a seam).
int RunPoolDaemon(WarmPoolOptions options);

}  // namespace capsule::pool
