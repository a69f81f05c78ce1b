// Path resolution confined to a container rootfs (openat2 RESOLVE_IN_ROOT),
// so a symlink in an image cannot point a mount or a device node outside
// the rootfs. Mount targets are then addressed as /proc/self/fd/N.
#pragma once

#include <sys/types.h>

#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::engine {

// Opens `path` as if `root_fd` were "/" (O_CLOEXEC added).
Result<UniqueFd> OpenInRoot(int root_fd, const std::string& path, int flags, mode_t mode = 0);
// mkdir -p of `path` inside the root; returns an O_PATH fd of the directory.
Result<UniqueFd> MkdirAllInRoot(int root_fd, const std::string& path, mode_t mode = 0755);
// A mount point: a directory, or an empty file when the source is a file.
Result<UniqueFd> EnsureMountPoint(int root_fd, const std::string& path, bool directory);
// "/proc/self/fd/<fd>": names the object behind fd for mount(2) and friends.
std::string FdPath(int fd);

// "a/b/c" -> {"a/b", "c"}; leading and duplicate slashes dropped.
std::pair<std::string, std::string> SplitParent(const std::string& path);

}  // namespace capsule::engine
