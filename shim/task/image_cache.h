// The dense device set's rootfs image cache (runtime.image_cache_dir): one
// erofs image per set of image layers, built by the first container of
// those layers and shared by every later one (QEMU opens it read-only). It
// is bounded (runtime.image_cache_max_bytes): after a build, the images
// used longest ago go until the cache fits, but never one a container is
// being made from, nor one just built. Lock files, one per key, make one
// builder per image and keep an image from going between its lookup and
// QEMU's open of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "shim/mount/mounter.h"

namespace capsule::shim::task {

// The cache's key of a rootfs ("" when it cannot be cached): the SHA-256 of
// its single overlay mount's lowerdir list when the upperdir holds nothing
// yet (committed snapshots never change; a used upper layer is the
// container's own).
std::string RootfsCacheKey(const std::vector<mount::MountSpec>& rootfs);

struct DiskImage {
  std::string path;
  // The container's own image: unlink it once QEMU holds an fd of it.
  bool own = false;
  bool built = false;  // made now, not found in the cache
  // A cached image's key lock, held until QEMU has opened the image: the
  // cache's trim skips an image whose lock is held.
  UniqueFd lock;
};

// The erofs image of the rootfs mounted at `tree`: the cache's for `key`
// (built there when missing, then the cache trimmed to `max_bytes`, 0:
// unbounded), or, without a key, one of the container's own in the cache
// dir.
Result<DiskImage> RootfsImage(const std::string& cache_dir, const std::string& key, const std::string& tree,
                              const std::string& container_id, uint64_t max_bytes);

struct TrimmedImage {
  std::string path;
  uint64_t bytes = 0;
};

// Removes cached images (<key>.erofs; not a container's own, not a partial
// build), least recently used first (their mtime, renewed at every use),
// until the cached images take at most `max_bytes` of disk. Skips `keep`
// and every image whose key lock another holder has. Returns what went.
std::vector<TrimmedImage> TrimImageCache(const std::string& cache_dir, uint64_t max_bytes, const std::string& keep);

}  // namespace capsule::shim::task
