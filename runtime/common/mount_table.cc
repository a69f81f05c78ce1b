// See mount_table.h. mountinfo escapes space, tab, newline and backslash
// in paths as octal ("\040").
#include "runtime/common/mount_table.h"

#include <sys/mount.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace capsule {
namespace {

std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> MountsUnder(const std::string& dir, bool include_dir) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return ErrnoStatus("open /proc/self/mountinfo");
  const std::string prefix = dir + "/";
  std::vector<std::string> found;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    fields >> id >> parent >> devno >> root >> mount_point;
    mount_point = Unescape(mount_point);
    if (mount_point.rfind(prefix, 0) == 0 || (include_dir && mount_point == dir)) found.push_back(mount_point);
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
