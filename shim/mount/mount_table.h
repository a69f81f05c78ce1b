// Reading the host's mount table (/proc/self/mountinfo): what is mounted
// under a directory, and detaching all of it — for the `delete` clean-up
// after a dead shim and for leak checks in tests.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::shim::mount {

// Mount points at or strictly below `dir`, deepest first.
Result<std::vector<std::string>> MountsUnder(const std::string& dir, bool include_dir = false);

// Detaches (MNT_DETACH) every mount point strictly below `dir`, deepest
// first, so nothing stays pinned. The first failure is returned after
// trying all of them.
Status UnmountTree(const std::string& dir);

}  // namespace capsule::shim::mount
