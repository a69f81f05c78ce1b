// Small filesystem helpers with Status errors that name the path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

Result<std::string> ReadFile(const std::string& path);
// The running program's own binary (readlink /proc/self/exe).
Result<std::string> SelfExePath();
// Writes via a temp file in the same directory and rename(2), so readers see
// the old or the new content, never a torn one. kDurable also fsyncs the
// data before the rename, so that a host crash leaves one of the two.
// kVolatile is for records of live processes (pid files, vm.json, pod and
// pool records, a bundle's address): a host crash ends what they describe,
// and they live under /run. The fsync cost 1.5-4 ms per file on ext4 in
// pod_start_bench, about 16 ms on every warm pod start.
enum class Durability { kDurable, kVolatile };
Status WriteFileAtomic(const std::string& path, std::string_view data, mode_t mode = 0644,
                       Durability durability = Durability::kDurable);
Status WriteFile(const std::string& path, std::string_view data);
// O_NONBLOCK on (or off) for `fd`, the one way the code base sets it;
// nothing is written when it is already so. The error names the fd.
Status SetNonBlocking(int fd, bool on = true);
// write(2) until all of `data` is out (EINTR retried); errors name `what`.
Status WriteAll(int fd, std::string_view data, const std::string& what);
// Whether `fd` is a memfd sealed against writes (F_SEAL_WRITE): no write(2),
// shared writable mapping or punched hole can change it, whoever holds it.
bool IsWriteSealed(int fd);
// The size of the file at `path` (stat, follows symlinks); nullopt if absent.
std::optional<uint64_t> FileSize(const std::string& path);
// mkdir -p; existing directories are fine.
Status MkdirAll(const std::string& path, mode_t mode = 0755);
// rm -rf that never crosses into another filesystem (a leftover mount stops it
// with an error instead of deleting the mounted tree's contents).
Status RemoveAll(const std::string& path);
bool PathExists(const std::string& path);
// Names in `dir` ("." and ".." left out), in readdir order; empty if it
// cannot be read.
std::vector<std::string> ListDir(const std::string& dir);

// A directory created under `parent` (default $TMPDIR or /tmp) and removed
// with its contents on destruction.
class TempDir {
 public:
  static Result<TempDir> Create(std::string_view prefix = "capsule", std::string parent = "");
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }
  std::string Join(std::string_view name) const { return path_ + "/" + std::string(name); }
  // Keeps the directory on destruction.
  std::string Release();

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace capsule
