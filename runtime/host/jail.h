// A root of its own for a daemon, as Firecracker's jailer gives its VMM:
// an empty tmpfs in the daemon's private mount namespace holding only what
// it must read (the host's /usr read-only, a few device nodes, a procfs
// that shows it only its own user's processes), then pivot_root into it.
// The host's /etc, /home, /var, /run, /tmp and every VM's state dir are
// gone from its view, so a compromised VMM reads nothing there even where
// file modes would let any user read.
//
// The plan is made before fork (allocations, stat, readlink); entering it
// in the child makes only async-signal-safe system calls.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

struct JailSpec {
  // An existing directory the new root's tmpfs is mounted on, inside the
  // daemon's mount namespace only (the host never sees the mount).
  std::string mountpoint;
  // Host directories bound read-only (nosuid, nodev) at the same path. A
  // path that is a symlink on the host (merged /usr's /lib -> usr/lib) is
  // made the same symlink. Missing paths are left out.
  std::vector<std::string> read_only_dirs = {"/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"};
  // Host files bound read-only at the same path (the loader's cache).
  std::vector<std::string> read_only_files = {"/etc/ld.so.cache"};
  // Device nodes bound at the same path when the host has them.
  // /dev/net/tun: a VMM that keeps root (hypervisor.vmm_uid_base 0) makes
  // taps by name; an unprivileged one can open it but make nothing.
  std::vector<std::string> devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", "/dev/random",
                                      "/dev/kvm",  "/dev/net/tun"};
  // A procfs with hidepid=invisible at /proc (the daemon reopens its own
  // fds through /proc/self/fd) and a read-only sysfs at /sys.
  // With the procfs, /dev/fd -> /proc/self/fd: how an interpreter reads a
  // script executed from an fd (a wrapper script as the VMM).
  bool proc = true;
  bool sys = true;
};

// One step of entering a jail; `what` names it in errors.
struct JailStep {
  enum Kind { kMountRoot, kMkdir, kTouch, kBindReadOnly, kSymlink, kMountProc, kMountSys, kPivot, kSealRoot };
  Kind kind;
  std::string path;    // inside the new root (absolute, under the mountpoint before the pivot)
  std::string source;  // kBindReadOnly: the host path; kSymlink: the link's target
  bool device = false;  // kBindReadOnly: keep device nodes usable (no nodev)
  std::string what;
};

struct JailPlan {
  std::string mountpoint;
  std::vector<JailStep> steps;
};

// Resolves the spec against this host (what exists, what is a symlink).
Result<JailPlan> PlanJail(const JailSpec& spec);

// Runs the plan in the calling process, which must be in a private mount
// namespace of its own (DaemonOptions::new_mount_namespace) and hold
// CAP_SYS_ADMIN. Returns -1 on success, else the index of the failed step
// with errno set. Async-signal-safe: for the child between fork and exec.
int EnterJail(const JailPlan& plan);

}  // namespace capsule
