// The "/" of a guest debug process started with tools from a container
// (capsule-runtime exec --tools-from): that container's root filesystem,
// read-only, with the guest's own /proc and /sys over it and a fresh tmpfs
// (64 MiB at most) on /tmp, so the container's binaries see the whole guest
// (every process, not the pod's pid namespace) and do not change the
// container's files by accident.
//
// The tenant may have replaced any of those files, so by default they run as
// the container's init does (engine::Confinement): its user, capabilities
// (less CAP_SYS_PTRACE, which in the guest's pid namespace reaches the agent)
// and seccomp profile, and a view the way a container gets it: /sys
// read-only, the init's masked and read-only paths applied to the guest's
// /proc, and a /dev of its own (the default devices and a new devpts
// instance) instead of the guest's. Only an operator who asks (agent.proto
// tools_as_guest_root) gets the guest's root: every capability, the guest's
// /dev and /sys as they are, and the guest's own root as /proc/1/root.
// Read-only is then no barrier to the command itself, which could remount.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::engine {

struct ToolsRootPlan {
  std::string rootfs;  // the lending container's root filesystem
  // As the container's init runs (the default); false: as the guest's root.
  bool confined = true;
  std::vector<std::string> masked_paths;    // the init's linux.maskedPaths
  std::vector<std::string> readonly_paths;  // the init's linux.readonlyPaths
};

// The read-only paths of /proc every confined view gets, whatever the
// lending container's spec says: each lets the guest's root reconfigure the
// guest kernel (kernel.modprobe and core_pattern run a file of its choosing
// with every privilege; sysrq-trigger needs no capability).
inline const std::vector<std::string>& ConfinedReadonlyPaths() {
  static const std::vector<std::string> paths = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                                 "/proc/sysrq-trigger"};
  return paths;
}

// Child side, in a mount namespace of its own (Launch unshares it),
// before the process's credentials are applied: cuts propagation to the
// agent, builds the view and chroots into it. A mount point the image lacks
// (or has as anything but a directory, such as a symlink) is left out
// rather than created: the container's files are never written.
Status EnterToolsRoot(const ToolsRootPlan& plan);

}  // namespace capsule::engine
