// openat2-based confined lookups; every missing component is created
// relative to the already-resolved parent fd, never by a re-walked string.
#include "agent/engine/secure_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include <vector>

namespace capsule::engine {
namespace {

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    if (slash > pos) out.push_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return out;
}

}  // namespace

std::string FdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

std::pair<std::string, std::string> SplitParent(const std::string& path) {
  std::vector<std::string> parts = Components(path);
  if (parts.empty()) return {"", ""};
  std::string parent;
  for (size_t i = 0; i + 1 < parts.size(); ++i) parent += (i ? "/" : "") + parts[i];
  return {parent, parts.back()};
}

Result<UniqueFd> OpenInRoot(int root_fd, const std::string& path, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  std::string rel = path;
  while (!rel.empty() && rel[0] == '/') rel.erase(0, 1);
  if (rel.empty()) rel = ".";
  int fd = static_cast<int>(::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how));
  if (fd < 0) return ErrnoStatus("open " + path + " in rootfs");
  return UniqueFd(fd);
}

Result<UniqueFd> MkdirAllInRoot(int root_fd, const std::string& path, mode_t mode) {
  // Usually the directory exists: one lookup instead of one per component.
  auto existing = OpenInRoot(root_fd, path, O_PATH | O_DIRECTORY);
  if (existing.ok() || existing.status().code() != Code::kNotFound) return existing;
  ASSIGN_OR_RETURN(UniqueFd cur, OpenInRoot(root_fd, "/", O_PATH | O_DIRECTORY));
  std::string prefix;
  for (const std::string& part : Components(path)) {
    prefix += "/" + part;
    auto next = OpenInRoot(root_fd, prefix, O_PATH | O_DIRECTORY);
    if (!next.ok() && next.status().code() == Code::kNotFound) {
      if (::mkdirat(cur.get(), part.c_str(), mode) != 0 && errno != EEXIST)
        return ErrnoStatus("mkdir " + prefix + " in rootfs");
      next = OpenInRoot(root_fd, prefix, O_PATH | O_DIRECTORY);
    }
    if (!next.ok()) return next.status();
    cur = std::move(*next);
  }
  return cur;
}

Result<UniqueFd> EnsureMountPoint(int root_fd, const std::string& path, bool directory) {
  if (directory) return MkdirAllInRoot(root_fd, path);
  auto [parent, name] = SplitParent(path);
  if (name.empty()) return OpenInRoot(root_fd, path, O_PATH);
  ASSIGN_OR_RETURN(UniqueFd dir, MkdirAllInRoot(root_fd, parent));
  // mknodat, not a lookup and then open(O_CREAT): on a virtio-fs rootfs
  // every step is a FUSE round trip, and a missing file (a CRI pod's
  // /etc/hostname, hosts and resolv.conf in most images) cost six (lookup,
  // lookup, create, getattr, flush, release) where this costs two. Whatever
  // is there already, a symlink included, answers EEXIST untouched, and the
  // open below resolves it inside the root.
  if (::mknodat(dir.get(), name.c_str(), S_IFREG | 0644, 0) != 0 && errno != EEXIST)
    return ErrnoStatus("create mount point " + path + " in rootfs");
  return OpenInRoot(root_fd, path, O_PATH);
}

}  // namespace capsule::engine
