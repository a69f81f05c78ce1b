// See image_cache.h.
#include "shim/task/image_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/sha256.h"
#include "runtime/erofs/erofs_image.h"

namespace capsule::shim::task {
namespace {

const log::Logger kImageCacheLog("shim.images");

constexpr std::string_view kImageSuffix = ".erofs";
constexpr std::string_view kOwnPrefix = "ctr-";  // a container's own image, never cached

std::string OptionValue(const std::vector<std::string>& options, std::string_view key) {
  for (const std::string& o : options) {
    if (o.size() > key.size() && o.compare(0, key.size(), key) == 0 && o[key.size()] == '=')
      return o.substr(key.size() + 1);
  }
  return "";
}

// True when `dir` is a directory holding no entry.
bool EmptyDir(const std::string& dir) {
  struct stat st{};
  return ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && ListDir(dir).empty();
}

std::string LockPath(const std::string& cache_dir, std::string_view key) {
  return fmt::format("{}/{}.lock", cache_dir, key);
}

// The key's lock file, locked. A trim may unlink a lock file it holds, so
// a lock taken on a file no longer at `path` is taken again on the new one.
Result<UniqueFd> LockKey(const std::string& path, bool wait) {
  for (;;) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return ErrnoStatus("open " + path);
    int rc;
    while ((rc = ::flock(fd.get(), LOCK_EX | (wait ? 0 : LOCK_NB))) != 0 && errno == EINTR) {
    }
    if (rc != 0) {
      if (errno == EWOULDBLOCK) return Unavailable(path + " is held");
      return ErrnoStatus("lock " + path);
    }
    struct stat held{}, named{};
    if (::fstat(fd.get(), &held) != 0) return ErrnoStatus("stat " + path);
    if (::stat(path.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) return fd;
  }
}

}  // namespace

std::string RootfsCacheKey(const std::vector<mount::MountSpec>& rootfs) {
  if (rootfs.size() != 1 || rootfs.front().type != "overlay") return "";
  const std::string lower = OptionValue(rootfs.front().options, "lowerdir");
  const std::string upper = OptionValue(rootfs.front().options, "upperdir");
  if (lower.empty() || (!upper.empty() && !EmptyDir(upper))) return "";
  return Sha256Hex("overlay lowerdir=" + lower);
}

Result<DiskImage> RootfsImage(const std::string& cache_dir, const std::string& key, const std::string& tree,
                              const std::string& container_id, uint64_t max_bytes) {
  RETURN_IF_ERROR_CTX(MkdirAll(cache_dir, 0700), "image cache");
  DiskImage out;
  if (key.empty()) {
    out.path = fmt::format("{}/{}{}{}", cache_dir, kOwnPrefix, container_id, kImageSuffix);
    out.own = out.built = true;
    RETURN_IF_ERROR(erofs::MakeErofsImage(tree, out.path));
    return out;
  }
  out.path = fmt::format("{}/{}{}", cache_dir, key, kImageSuffix);
  // One builder per key; the others wait and find it made.
  ASSIGN_OR_RETURN(out.lock, LockKey(LockPath(cache_dir, key), /*wait=*/true));
  if (PathExists(out.path)) {
    // Used now: the trim goes by the last use.
    if (::utimensat(AT_FDCWD, out.path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW) != 0)
      kImageCacheLog.Warn("image cache: cannot mark {} used: {}", out.path, ErrnoStatus("utimensat").message());
    return out;
  }
  kImageCacheLog.Info("container {}: building the rootfs image {} (first use of these layers)", container_id, out.path);
  RETURN_IF_ERROR(erofs::MakeErofsImage(tree, out.path));
  out.built = true;
  if (max_bytes != 0) {
    for (const TrimmedImage& t : TrimImageCache(cache_dir, max_bytes, out.path))
      kImageCacheLog.Info("image cache: removed {} ({} MiB, the least recently used) to stay within {} MiB", t.path,
                          t.bytes >> 20, max_bytes >> 20);
  }
  return out;
}

std::vector<TrimmedImage> TrimImageCache(const std::string& cache_dir, uint64_t max_bytes, const std::string& keep) {
  struct Entry {
    std::string key;
    std::string path;
    uint64_t bytes;
    struct timespec used;
  };
  std::vector<Entry> cached;
  uint64_t total = 0;
  for (const std::string& name : ListDir(cache_dir)) {
    if (name.size() <= kImageSuffix.size() || name.compare(name.size() - kImageSuffix.size(), std::string::npos,
                                                           kImageSuffix) != 0)
      continue;
    if (name.compare(0, kOwnPrefix.size(), kOwnPrefix) == 0) continue;
    const std::string path = cache_dir + "/" + name;
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const uint64_t bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    total += bytes;
    cached.push_back({name.substr(0, name.size() - kImageSuffix.size()), path, bytes, st.st_mtim});
  }
  std::sort(cached.begin(), cached.end(), [](const Entry& a, const Entry& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  std::vector<TrimmedImage> trimmed;
  for (const Entry& e : cached) {
    if (total <= max_bytes) break;
    if (e.path == keep) continue;
    const std::string lock_path = LockPath(cache_dir, e.key);
    auto lock = LockKey(lock_path, /*wait=*/false);
    if (!lock.ok()) continue;  // being built or about to be plugged
    if (::unlink(e.path.c_str()) != 0) {
      kImageCacheLog.Warn("image cache: cannot remove {}: {}", e.path, ErrnoStatus("unlink").message());
      continue;
    }
    ::unlink(lock_path.c_str());  // while held: a waiter re-locks the next one (LockKey)
    total -= e.bytes;
    trimmed.push_back({e.path, e.bytes});
  }
  return trimmed;
}

}  // namespace capsule::shim::task
