// A tap interface from /dev/net/tun in the caller's netns, shaped for a
// virtio-net back end: L2 frames, no packet-info prefix, a virtio-net header
// before each frame (the VMM then passes checksum/GSO hints through).
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::network {

// From linux/if.h: IFNAMSIZ (16) including the terminating NUL.
inline constexpr size_t kMaxIfNameLen = 15;

// Creates the tap (non-persistent: it disappears when its last fd closes,
// or earlier when deleted over rtnetlink). INVALID_ARGUMENT for a bad name.
Result<UniqueFd> CreateTap(const std::string& name);

}  // namespace capsule::network
