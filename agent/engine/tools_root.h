// The "/" of a guest debug process started with tools from a container
// (capsule-runtime exec --tools-from): that container's root filesystem,
// read-only, with the guest's own /proc, /sys and /dev over it and a fresh
// tmpfs (64 MiB at most) on /tmp, so the container's binaries see the whole
// guest (every process, not the pod's pid namespace) and do not change the
// container's files by accident. Read-only is no barrier to the command
// itself: it runs as the guest's root and could remount. The guest's own
// root stays reachable as /proc/1/root. An image without /dev gives no
// /dev/ptmx, so -t then fails to open it.
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
