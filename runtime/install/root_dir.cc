// RootDir (see root_dir.h): openat walks with O_NOFOLLOW, atomic writes.
#include "runtime/install/root_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"

namespace capsule::install {
namespace {

std::string JoinDisplay(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += "/" + parts[i];
  return out;
}

std::string TempName(const std::string& base) {
  std::random_device rd;
  return "." + base + ".capsule-tmp-" + std::to_string(rd());
}

}  // namespace

Result<std::vector<std::string>> SplitAbsolute(std::string_view path) {
  if (path.empty() || path[0] != '/') return InvalidArgument(std::string(path) + ": not an absolute path");
  std::vector<std::string> parts;
  size_t p = 0;
  while (p < path.size()) {
    size_t q = path.find('/', p);
    if (q == std::string_view::npos) q = path.size();
    std::string_view part = path.substr(p, q - p);
    if (part == "." || part == "..") return InvalidArgument(std::string(path) + ": . or .. in the path");
    if (!part.empty()) parts.emplace_back(part);
    p = q + 1;
  }
  if (parts.empty()) return InvalidArgument(std::string(path) + ": the root itself");
  return parts;
}

Result<RootDir> RootDir::Open(const std::string& root) {
  int fd = ::open(root.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open root " + root);
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  return RootDir(r == "/" ? "" : r, UniqueFd(fd));
}

std::string RootDir::Display(std::string_view path) const { return root_ + std::string(path); }

Result<UniqueFd> RootDir::OpenParent(std::string_view path, bool create, std::vector<std::string>* created) const {
  ASSIGN_OR_RETURN(auto parts, SplitAbsolute(path));
  UniqueFd dir(::dup(fd_.get()));
  if (!dir) return ErrnoStatus("dup root fd");
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::string shown = Display(JoinDisplay(parts, i + 1));
    int fd = ::openat(dir.get(), parts[i].c_str(), O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
      if (::mkdirat(dir.get(), parts[i].c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + shown);
      if (created != nullptr) created->push_back(JoinDisplay(parts, i + 1));
      fd = ::openat(dir.get(), parts[i].c_str(), O_DIRECTORY | O_NOFOLLOW | O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) {
      struct stat st{};
      if ((errno == ELOOP || errno == ENOTDIR) && ::fstatat(dir.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode)) {
        return FailedPrecondition(shown + " is a symlink; the installer does not follow symlinks in the target root")
            .WithReason(reason::kWrongFileType);
      }
      return ErrnoStatus("open directory " + shown);
    }
    dir.reset(fd);
  }
  return dir;
}

Result<std::optional<std::string>> RootDir::Read(std::string_view path) const {
  auto parent = OpenParent(path, false, nullptr);
  if (!parent.ok()) {
    if (parent.status().code() == Code::kNotFound) return std::optional<std::string>();
    return std::move(parent).status();
  }
  ASSIGN_OR_RETURN(auto parts, SplitAbsolute(path));
  std::string shown = Display(path);
  struct stat st{};
  if (::fstatat(parent->get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return ErrnoStatus("stat " + shown);
  }
  if (S_ISLNK(st.st_mode)) {
    return FailedPrecondition(shown + " is a symlink; the installer does not follow symlinks in the target root")
        .WithReason(reason::kWrongFileType);
  }
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(shown + " is not a regular file")
      .WithReason(reason::kWrongFileType);
  UniqueFd fd(::openat(parent->get(), parts.back().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + shown);
  std::string data;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read " + shown);
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return std::optional<std::string>(std::move(data));
}

Result<std::optional<mode_t>> RootDir::Mode(std::string_view path) const {
  auto parent = OpenParent(path, false, nullptr);
  if (!parent.ok()) {
    if (parent.status().code() == Code::kNotFound) return std::optional<mode_t>();
    return std::move(parent).status();
  }
  ASSIGN_OR_RETURN(auto parts, SplitAbsolute(path));
  struct stat st{};
  if (::fstatat(parent->get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return std::optional<mode_t>();
    return ErrnoStatus("stat " + Display(path));
  }
  if (S_ISLNK(st.st_mode)) {
    return FailedPrecondition(Display(path) + " is a symlink; the installer does not follow symlinks in the target root")
        .WithReason(reason::kWrongFileType);
  }
  return std::optional<mode_t>(st.st_mode & 07777);
}

Status RootDir::WriteAtomic(std::string_view path, std::string_view data, mode_t mode,
                            std::vector<std::string>* created) const {
  ASSIGN_OR_RETURN(UniqueFd parent, OpenParent(path, true, created));
  ASSIGN_OR_RETURN(auto parts, SplitAbsolute(path));
  const std::string& name = parts.back();
  std::string shown = Display(path);
  struct stat st{};
  if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISLNK(st.st_mode)) {
      return FailedPrecondition(shown + " is a symlink; the installer does not follow symlinks in the target root")
          .WithReason(reason::kWrongFileType);
    }
    return FailedPrecondition(shown + " exists and is not a regular file").WithReason(reason::kWrongFileType);
  }
  std::string tmp = TempName(name);
  UniqueFd fd(::openat(parent.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return ErrnoStatus("create a temp file beside " + shown);
  Status st_write = WriteAll(fd.get(), data, shown);
  if (st_write.ok() && ::fchmod(fd.get(), mode) != 0) st_write = ErrnoStatus("chmod " + shown);
  if (st_write.ok() && ::fsync(fd.get()) != 0) st_write = ErrnoStatus("fsync " + shown);
  if (st_write.ok() && ::renameat(parent.get(), tmp.c_str(), parent.get(), name.c_str()) != 0) {
    st_write = ErrnoStatus("rename into " + shown);
  }
  if (!st_write.ok()) ::unlinkat(parent.get(), tmp.c_str(), 0);
  return st_write;
}

Status RootDir::Remove(std::string_view path) const {
  auto parent = OpenParent(path, false, nullptr);
  if (!parent.ok()) return parent.status().code() == Code::kNotFound ? Status::Ok() : std::move(parent).status();
  ASSIGN_OR_RETURN(auto parts, SplitAbsolute(path));
  struct stat st{};
  if (::fstatat(parent->get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : ErrnoStatus("stat " + Display(path));
  }
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(Display(path) + " is not a regular file; left in place")
      .WithReason(reason::kWrongFileType);
  if (::unlinkat(parent->get(), parts.back().c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoStatus("remove " + Display(path));
  }
  return Status::Ok();
}

Status RootDir::RemoveDirIfEmpty(std::string_view path) const {
  auto parent = OpenParent(path, false, nullptr);
  if (!parent.ok()) return parent.status().code() == Code::kNotFound ? Status::Ok() : std::move(parent).status();
  ASSIGN_OR_RETURN(auto parts, SplitAbsolute(path));
  if (::unlinkat(parent->get(), parts.back().c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT && errno != ENOTEMPTY &&
      errno != EEXIST) {
    return ErrnoStatus("remove directory " + Display(path));
  }
  return Status::Ok();
}

}  // namespace capsule::install
