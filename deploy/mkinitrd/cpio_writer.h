// A reproducible "newc" cpio archive (the format the kernel unpacks into its
// initramfs), built in memory: entries are sorted by path, owned by root,
// stamped with one fixed mtime and numbered in order, so the same inputs
// always give the same bytes whatever the build machine's umask, clock or
// directory order. Device nodes are written without root privileges.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::deploy {

class CpioArchive {
 public:
  explicit CpioArchive(uint32_t mtime) : mtime_(mtime) {}

  // Paths are absolute in the image ("/init"); missing parent directories
  // are added (mode 0755). Adding the same path twice with different
  // content is INVALID_ARGUMENT; the same content again is fine.
  Status AddDirectory(std::string_view path, mode_t mode = 0755);
  Status AddFile(std::string_view path, std::string data, mode_t mode);
  Status AddSymlink(std::string_view path, std::string_view target);
  Status AddCharDevice(std::string_view path, mode_t mode, uint32_t major, uint32_t minor);

  bool Contains(std::string_view path) const { return entries_.count(Normalize(path)) != 0; }
  size_t size() const { return entries_.size(); }
  // Sum of file contents, i.e. roughly the unpacked size.
  uint64_t content_bytes() const;

  // The archive: every entry in path order, then the TRAILER!!! record.
  std::string Serialize() const;

 private:
  struct Entry {
    uint32_t mode = 0;  // type bits | permissions
    std::string data;   // file content or symlink target
    uint32_t rdev_major = 0, rdev_minor = 0;
    bool operator==(const Entry&) const = default;
  };
  static std::string Normalize(std::string_view path);  // "/a/b" -> "a/b"
  Status Add(std::string_view path, Entry entry);
  Status AddParents(const std::string& rel);

  uint32_t mtime_;
  std::map<std::string, Entry> entries_;  // relative path -> entry; sorted
};

}  // namespace capsule::deploy
