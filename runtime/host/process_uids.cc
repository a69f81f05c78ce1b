// See process_uids.h.
#include "runtime/host/process_uids.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include "runtime/common/file_util.h"

namespace capsule {
namespace {

// The four uids of the status file's "Uid:" line; none when it has none.
std::vector<uid_t> StatusUids(const std::string& status) {
  std::vector<uid_t> uids;
  std::istringstream line(StatusField(status, "Uid"));
  unsigned long v = 0;
  while (uids.size() < 4 && line >> v) uids.push_back(static_cast<uid_t>(v));
  return uids;
}

}  // namespace

std::string StatusField(std::string_view status, std::string_view key) {
  for (size_t line = 0; line < status.size();) {
    const size_t end = std::min(status.find('\n', line), status.size());
    std::string_view l = status.substr(line, end - line);
    if (l.size() > key.size() && l.substr(0, key.size()) == key && l[key.size()] == ':') {
      l.remove_prefix(key.size() + 1);
      while (!l.empty() && (l.front() == ' ' || l.front() == '\t')) l.remove_prefix(1);
      return std::string(l);
    }
    line = end + 1;
  }
  return "";
}

Result<std::vector<pid_t>> ProcessesRunningAs(uid_t uid) {
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return ErrnoStatus("opendir /proc");
  std::vector<pid_t> pids;
  while (dirent* e = ::readdir(proc.get())) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    auto status = ReadFile("/proc/" + std::string(e->d_name) + "/status");
    if (!status.ok()) continue;  // ended meanwhile
    for (uid_t u : StatusUids(*status)) {
      if (u == uid) {
        pids.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
  }
  return pids;
}

}  // namespace capsule
