// RootDir: file operations confined to a target root (the node's / seen
// at /host from the installer's pod, or a scratch root in tests). Paths
// are walked one component at a time with O_NOFOLLOW, so a symlink planted
// anywhere under the root is an error that names it, never followed out
// of the root. Writes go to a temp file in the same directory, then
// rename(2): containerd and the shim see the old or the new file.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::install {

class RootDir {
 public:
  // `root` itself may be reached through symlinks; below it none are.
  static Result<RootDir> Open(const std::string& root);

  const std::string& root() const { return root_; }
  // How errors and logs name `path` (an absolute path inside the root).
  std::string Display(std::string_view path) const;

  // The file's bytes, nullopt when absent; an error when it is a symlink
  // or not a regular file.
  Result<std::optional<std::string>> Read(std::string_view path) const;
  // The file's permission bits, nullopt when absent (symlinks refused).
  Result<std::optional<mode_t>> Mode(std::string_view path) const;
  // Creates missing parent directories (0755); `created` gets each one
  // made, outermost first.
  Status WriteAtomic(std::string_view path, std::string_view data, mode_t mode,
                     std::vector<std::string>* created = nullptr) const;
  // Removes a regular file; absent is fine.
  Status Remove(std::string_view path) const;
  // Removes an empty directory; absent or not empty is fine.
  Status RemoveDirIfEmpty(std::string_view path) const;

 private:
  RootDir(std::string root, UniqueFd fd) : root_(std::move(root)), fd_(std::move(fd)) {}
  // The directory holding `path`, walked without following symlinks.
  Result<UniqueFd> OpenParent(std::string_view path, bool create, std::vector<std::string>* created) const;

  std::string root_;
  UniqueFd fd_;
};

// "/a/b/c" -> {"a", "b", "c"}; an error for "..", "." or a relative path.
Result<std::vector<std::string>> SplitAbsolute(std::string_view path);

}  // namespace capsule::install
