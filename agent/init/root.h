// The initramfs is the kernel's "rootfs" mount, which pivot_root(2) refuses
// to move ("The rootfs (initial ramfs) cannot be pivot_root()ed"), and every
// container runtime pivots into the container's root. So PID 1 first moves
// its root onto a real mount: a bind mount of the initramfs root, moved over
// "/" and chrooted into. No file is copied; the view is the same.
#pragma once

#include "runtime/common/status.h"

namespace capsule::agent::init {

// Does the bind+move+chroot when "/" is the kernel's rootfs; a no-op (OK)
// when "/" already is a mount with a parent (a second call, or a
// disk-based root).
Status MakeRootPivotable();

// True when "/" is the initial rootfs: it has no parent mount.
bool RootIsInitramfs();

}  // namespace capsule::agent::init
