// newc layout (see the kernel's Documentation/driver-api/early-userspace/
// buffer-format.rst): "070701", thirteen 8-digit hex fields, the NUL-ended
// name padded to 4 bytes, the data padded to 4 bytes.
#include "deploy/mkinitrd/cpio_writer.h"

#include <fmt/format.h>
#include <sys/stat.h>

namespace capsule::deploy {
namespace {

void Pad4(std::string& out) {
  while (out.size() % 4 != 0) out.push_back('\0');
}

void AppendHeader(std::string& out, uint32_t ino, uint32_t mode, uint32_t nlink, uint32_t mtime, size_t size,
                  uint32_t rmajor, uint32_t rminor, const std::string& name) {
  out += fmt::format("070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}", ino,
                     mode, 0u, 0u, nlink, mtime, static_cast<uint32_t>(size), 0u, 0u, rmajor, rminor,
                     static_cast<uint32_t>(name.size() + 1), 0u);
  out += name;
  out.push_back('\0');
  Pad4(out);
}

}  // namespace

std::string CpioArchive::Normalize(std::string_view path) {
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

Status CpioArchive::AddParents(const std::string& rel) {
  for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
    std::string parent = rel.substr(0, slash);
    auto it = entries_.find(parent);
    if (it == entries_.end()) {
      entries_.emplace(parent, Entry{S_IFDIR | 0755, "", 0, 0});
    } else if (!S_ISDIR(it->second.mode)) {
      return InvalidArgument(fmt::format("image path /{} is needed as a directory for /{}", parent, rel));
    }
  }
  return Status::Ok();
}

Status CpioArchive::Add(std::string_view path, Entry entry) {
  std::string rel = Normalize(path);
  if (rel.empty() || rel == "." || rel == ".." || rel.find("/./") != std::string::npos ||
      rel.find("/../") != std::string::npos || rel.rfind("./", 0) == 0 || rel.rfind("../", 0) == 0 ||
      rel.find("//") != std::string::npos || rel.ends_with("/..") || rel.ends_with("/.")) {
    return InvalidArgument(fmt::format("bad image path '{}'", path));
  }
  RETURN_IF_ERROR(AddParents(rel));
  auto [it, inserted] = entries_.emplace(rel, entry);
  if (!inserted && !(it->second == entry)) {
    // A directory added implicitly first may get its explicit mode later.
    if (S_ISDIR(it->second.mode) && S_ISDIR(entry.mode)) {
      it->second = std::move(entry);
      return Status::Ok();
    }
    return InvalidArgument(fmt::format("image path /{} added twice with different content", rel));
  }
  return Status::Ok();
}

Status CpioArchive::AddDirectory(std::string_view path, mode_t mode) {
  return Add(path, Entry{S_IFDIR | (mode & 07777), "", 0, 0});
}

Status CpioArchive::AddFile(std::string_view path, std::string data, mode_t mode) {
  return Add(path, Entry{S_IFREG | (mode & 07777), std::move(data), 0, 0});
}

Status CpioArchive::AddSymlink(std::string_view path, std::string_view target) {
  if (target.empty()) return InvalidArgument(fmt::format("symlink {} has an empty target", path));
  return Add(path, Entry{S_IFLNK | 0777, std::string(target), 0, 0});
}

Status CpioArchive::AddCharDevice(std::string_view path, mode_t mode, uint32_t major, uint32_t minor) {
  return Add(path, Entry{S_IFCHR | (mode & 07777), "", major, minor});
}

uint64_t CpioArchive::content_bytes() const {
  uint64_t total = 0;
  for (const auto& [path, e] : entries_) total += e.data.size();
  return total;
}

std::string CpioArchive::Serialize() const {
  std::string out;
  out.reserve(static_cast<size_t>(content_bytes()) + entries_.size() * 160 + 512);
  uint32_t ino = 1;
  for (const auto& [path, e] : entries_) {
    // nlink 1 for files: with nlink > 1 the kernel treats equal inode
    // numbers as hard links.
    uint32_t nlink = S_ISDIR(e.mode) ? 2 : 1;
    AppendHeader(out, ino++, e.mode, nlink, mtime_, e.data.size(), e.rdev_major, e.rdev_minor, path);
    out += e.data;
    Pad4(out);
  }
  AppendHeader(out, 0, 0, 1, 0, 0, 0, 0, "TRAILER!!!");
  return out;
}

}  // namespace capsule::deploy
