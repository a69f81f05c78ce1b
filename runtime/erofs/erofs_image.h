// MakeErofsImage: a read-only erofs image of a directory tree, made by
// erofs-utils' mkfs.erofs. The dense device set (copy-on-write clones, no
// vhost-user) cannot share a rootfs through virtio-fs; it hands the guest
// such an image on a SCSI disk instead, which QEMU emulates itself.
// Owners, modes, mtimes, symlinks, device nodes and xattrs (file
// capabilities) are kept; data is stored uncompressed, so the guest reads it
// without decompressing under TCG.
#pragma once

#include <chrono>
#include <string>

#include "runtime/common/status.h"

namespace capsule::erofs {

struct ErofsOptions {
  std::string mkfs = "/usr/bin/mkfs.erofs";
  std::chrono::milliseconds timeout{300000};
};

// Writes `image` (replacing it atomically: built beside it, then renamed;
// mode 0644). Errors name the source, the image and mkfs.erofs's own words.
Status MakeErofsImage(const std::string& source_dir, const std::string& image, const ErofsOptions& options = {});

}  // namespace capsule::erofs
