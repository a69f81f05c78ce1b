// Filesystem helpers: whole-file read/write, mkdir -p, rm -rf, temp dirs.
#include "runtime/common/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "runtime/common/unique_fd.h"

namespace capsule {

Result<std::string> SelfExePath() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0) return ErrnoStatus("readlink /proc/self/exe");
  if (static_cast<size_t>(n) == path.size()) return InvalidArgument("readlink /proc/self/exe: path too long");
  path.resize(static_cast<size_t>(n));
  return path;
}

bool IsWriteSealed(int fd) {
  const int seals = ::fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (seals & F_SEAL_WRITE) != 0;
}

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + path);
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status SetNonBlocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return ErrnoStatus(fmt::format("fcntl(F_GETFL) on fd {}", fd));
  const int want = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (want != flags && ::fcntl(fd, F_SETFL, want) != 0)
    return ErrnoStatus(fmt::format("fcntl(F_SETFL) O_NONBLOCK {} on fd {}", on ? "on" : "off", fd));
  return Status::Ok();
}

Status WriteAll(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("write " + what);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(std::move(n));
  }
  ::closedir(d);
  return out;
}

std::optional<uint64_t> FileSize(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.st_size);
}

Status WriteFile(const std::string& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return ErrnoStatus("open " + path);
  return WriteAll(fd.get(), data, path);
}

Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode, Durability durability) {
  std::string tmp = path + ".tmpXXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) return ErrnoStatus("create temp file for " + path);
  Status st = WriteAll(fd.get(), data, tmp);
  if (st.ok() && ::fchmod(fd.get(), mode) != 0) st = ErrnoStatus("chmod " + tmp);
  if (st.ok() && durability == Durability::kDurable && ::fsync(fd.get()) != 0) st = ErrnoStatus("fsync " + tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus("rename to " + path);
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

Status MkdirAll(const std::string& path, mode_t mode) {
  if (path.empty()) return InvalidArgument("mkdir: empty path");
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + cur);
  }
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(path + " exists and is not a directory");
  return Status::Ok();
}

namespace {
Status RemoveAllAt(int parent_fd, const std::string& name, const std::string& display,
                   dev_t root_dev) {
  struct stat st{};
  if (::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("stat " + display);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT)
      return ErrnoStatus("unlink " + display);
    return Status::Ok();
  }
  if (st.st_dev != root_dev) return FailedPrecondition(display + " is a mount point; not removing it");
  // A bind mount from the same filesystem keeps st_dev; the kernel still
  // knows it is a mount root (Linux >= 5.8).
  struct statx stx{};
  if (::statx(parent_fd, name.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) == 0 &&
      (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0)
    return FailedPrecondition(display + " is a mount point; not removing it");
  UniqueFd dfd(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dfd) return ErrnoStatus("open " + display);
  DIR* dir = ::fdopendir(::dup(dfd.get()));
  if (dir == nullptr) return ErrnoStatus("opendir " + display);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(dir);
  for (const auto& n : names) RETURN_IF_ERROR(RemoveAllAt(dfd.get(), n, display + "/" + n, root_dev));
  if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    return ErrnoStatus("rmdir " + display);
  return Status::Ok();
}
}  // namespace

Status RemoveAll(const std::string& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("stat " + path);
  }
  return RemoveAllAt(AT_FDCWD, path, path, st.st_dev);
}

bool PathExists(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0;
}

Result<TempDir> TempDir::Create(std::string_view prefix, std::string parent) {
  if (parent.empty()) {
    const char* env = std::getenv("TMPDIR");
    parent = (env != nullptr && *env != '\0') ? env : "/tmp";
  }
  std::string tmpl = parent + "/" + std::string(prefix) + ".XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return ErrnoStatus("mkdtemp " + tmpl);
  return TempDir(std::move(tmpl));
}

TempDir::TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    if (!path_.empty()) (void)RemoveAll(path_);
    path_ = std::exchange(other.path_, {});
  }
  return *this;
}

TempDir::~TempDir() {
  if (!path_.empty()) (void)RemoveAll(path_);
}

std::string TempDir::Release() { return std::exchange(path_, {}); }

}  // namespace capsule
