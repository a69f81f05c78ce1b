// The "/" of a guest debug process started with tools from a container
// (capsule-runtime exec --tools-from): that container's root filesystem,
// read-only, with the guest's own /proc, /sys and /dev over it and a fresh
// tmpfs on /tmp, so the container's binaries see the whole guest (every
// process, not the pod's pid namespace) without being able to change the
// container's files. The guest's own root stays reachable as /proc/1/root.
#pragma once

#include <string>

#include "runtime/common/status.h"

namespace capsule::engine {

// Child side, in a mount namespace of its own (the launcher unshares it):
// cuts propagation to the agent, builds the view and chroots into it. A
// mount point the image lacks (or has as anything but a directory, such as
// a symlink) is left out rather than created: the container's files are
// never written.
Status EnterToolsRoot(const std::string& rootfs);

}  // namespace capsule::engine
