// Letting go of a removed container's part of the virtio-fs share. The
// guest keeps the inodes of /run/capsule/shared/<id>/... after the container
// is gone: virtio-fs submounts (announce_submounts) stay mounted in the
// agent's namespace, and dentries stay cached. virtiofsd holds a host fd on
// every inode the guest still references, and until the guest sends FUSE
// FORGET for them the host cannot unmount the container's rootfs and binds
// (EBUSY). So the agent releases them in order before it answers
// RemoveContainer: detach the submounts, then evict unused dentries and
// inodes (vm.drop_caches = 2), which queues the FORGETs.
#pragma once

#include <string>

#include "runtime/common/status.h"

namespace capsule::agent::storage {

// `dir`: the container's directory in the guest's view of the share.
Status ReleaseSharedSubtree(const std::string& dir);

}  // namespace capsule::agent::storage
