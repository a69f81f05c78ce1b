// See mount_table.h. mountinfo escapes space, tab, newline and backslash
// in paths as octal ("\040").
#include "runtime/common/mount_table.h"

#include <sys/mount.h>

#include <algorithm>
#include <sstream>

#include "runtime/common/file_util.h"

namespace capsule {
namespace {

bool Octal(char c) { return c >= '0' && c <= '7'; }

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && Octal(s[i + 1]) && Octal(s[i + 2]) && Octal(s[i + 3])) {
      out += static_cast<char>(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::vector<MountEntry> ParseMountInfo(std::string_view text) {
  std::vector<MountEntry> out;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash));
    MountEntry e;
    std::string devno;
    if (!(head >> e.id >> e.parent_id >> devno >> e.root >> e.mount_point >> e.options)) continue;
    // Split on single spaces: an empty source is written as nothing
    // between two of them (mount -t tmpfs "" /x).
    const std::string tail = line.substr(dash + 3);
    const size_t s1 = tail.find(' ');
    if (s1 == std::string::npos || s1 == 0) continue;
    const size_t s2 = tail.find(' ', s1 + 1);
    e.fstype = tail.substr(0, s1);
    e.source = tail.substr(s1 + 1, s2 == std::string::npos ? std::string::npos : s2 - s1 - 1);
    if (s2 != std::string::npos) e.super_options = tail.substr(s2 + 1);
    e.root = Unescape(e.root);
    e.mount_point = Unescape(e.mount_point);
    e.source = Unescape(e.source);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<MountEntry>> ReadMountTable() {
  ASSIGN_OR_RETURN(std::string text, ReadFile("/proc/self/mountinfo"));
  return ParseMountInfo(text);
}

Result<std::vector<std::string>> MountsUnder(const std::string& dir, bool include_dir) {
  ASSIGN_OR_RETURN(std::vector<MountEntry> table, ReadMountTable());
  const std::string prefix = dir + "/";
  std::vector<std::string> found;
  for (const MountEntry& e : table) {
    if (e.mount_point.rfind(prefix, 0) == 0 || (include_dir && e.mount_point == dir)) found.push_back(e.mount_point);
  }
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a < b;
  });
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

Status UnmountTree(const std::string& dir) {
  ASSIGN_OR_RETURN(auto targets, MountsUnder(dir));
  Status result;
  for (const auto& t : targets) {
    if (::umount2(t.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT && result.ok())
      result = ErrnoStatus("detach " + t);
  }
  return result;
}

}  // namespace capsule
