// Reading this mount namespace's table (/proc/self/mountinfo): what is
// mounted under a directory, and detaching all of it. The shim's `delete`
// clean-up after a dead shim, the agent's release of a removed container's
// share, and the tests' leak checks use it.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

// Mount points at or strictly below `dir`, deepest first.
Result<std::vector<std::string>> MountsUnder(const std::string& dir, bool include_dir = false);

// Detaches (MNT_DETACH) every mount point strictly below `dir`, deepest
// first, so nothing stays pinned. The first failure is returned after
// trying all of them.
Status UnmountTree(const std::string& dir);

}  // namespace capsule
