// See process_usage.h.
#include "runtime/host/process_usage.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/common/file_util.h"
#include "runtime/host/proc_stat.h"
#include "runtime/host/process_uids.h"

namespace capsule {

Result<ProcessUsageSample> ProcessUsage(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  auto statm = ReadFile(base + "/statm");
  auto stat = ReadProcStat(pid);
  if (!statm.ok() || stat.status().code() == Code::kNotFound) return NotFound("process " + std::to_string(pid) + " is gone");
  if (!stat.ok()) return stat.status();
  ProcessUsageSample s;
  // statm: size resident shared ... (pages)
  const char* p = statm->c_str();
  char* end = nullptr;
  (void)std::strtoull(p, &end, 10);
  const unsigned long long resident = std::strtoull(end, &end, 10);
  s.rss_bytes = resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  s.cpu_seconds =
      static_cast<double>(stat->utime_ticks + stat->stime_ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return s;
}

Result<uint64_t> ThreadsBusyNs(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  const std::vector<std::string> tids = ListDir(tasks);
  if (tids.empty()) return NotFound("process " + std::to_string(pid) + " is gone");
  uint64_t ns = 0;
  for (const std::string& tid : tids) {
    auto text = ReadFile(tasks + "/" + tid + "/schedstat");
    if (!text.ok()) continue;  // the thread exited meanwhile
    char* end = nullptr;
    const unsigned long long run = std::strtoull(text->c_str(), &end, 10);
    const unsigned long long wait = std::strtoull(end, &end, 10);
    ns += run + wait;
  }
  return ns;
}

namespace {

// The value of a "Key:   N kB" line of a /proc file, in bytes (0 if absent).
uint64_t KbField(const std::string& text, std::string_view key) {
  return std::strtoull(StatusField(text, key).c_str(), nullptr, 10) << 10;
}

// One mapping of /proc/<pid>/smaps: its permissions ("rw-p"), what it maps
// ("" for anonymous memory) and the sizes read here, in kB.
struct Mapping {
  std::string_view perms, name;
  uint64_t rss_kb = 0, pss_kb = 0, private_kb = 0, anonymous_kb = 0;
};

// Calls `each` with every mapping of an smaps text, once its fields are read.
template <typename Each>
void ForEachMapping(std::string_view smaps, Each each) {
  std::optional<Mapping> m;
  size_t at = 0;
  while (at < smaps.size()) {
    size_t end = smaps.find('\n', at);
    if (end == std::string_view::npos) end = smaps.size();
    const std::string_view line = smaps.substr(at, end - at);
    at = end + 1;
    // A mapping's header starts with its address range; its fields follow.
    const size_t colon = line.find(':');
    const size_t space = line.find(' ');
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && space != std::string_view::npos &&
        line.find('-') < space) {
      if (m) each(*m);
      m.emplace();
      m->perms = line.substr(space + 1, 4);
      // Address, permissions, offset, device and inode, then the name.
      size_t field = space;
      for (int i = 0; i < 4 && field != std::string_view::npos; ++i) field = line.find(' ', field + 1);
      if (field != std::string_view::npos) {
        const size_t name = line.find_first_not_of(' ', field);
        if (name != std::string_view::npos) m->name = line.substr(name);
      }
      continue;
    }
    if (!m || colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    const uint64_t kb = std::strtoull(std::string(line.substr(colon + 1)).c_str(), nullptr, 10);
    if (key == "Rss") m->rss_kb = kb;
    else if (key == "Pss") m->pss_kb = kb;
    else if (key == "Private_Clean" || key == "Private_Dirty") m->private_kb += kb;
    else if (key == "Anonymous") m->anonymous_kb = kb;
  }
  if (m) each(*m);
}

// Private pages of a file or shared-memory mapping that are not anonymous
// copies are the file's: they outlive the process.
uint64_t OwnKb(const Mapping& map) { return std::min(map.private_kb, map.anonymous_kb); }

}  // namespace

Result<ProcessMemory> ReadProcessMemory(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  auto status = ReadFile(base + "/status");
  auto smaps = ReadFile(base + "/smaps");
  if (!status.ok() || !smaps.ok()) return NotFound("process " + std::to_string(pid) + " is gone");
  ProcessMemory m;
  m.rss = KbField(*status, "VmRSS");
  m.rss_anon = KbField(*status, "RssAnon");
  m.rss_file = KbField(*status, "RssFile");
  m.rss_shmem = KbField(*status, "RssShmem");
  ForEachMapping(*smaps, [&m](const Mapping& map) {
    m.pss += map.pss_kb << 10;
    m.own_bytes += OwnKb(map) << 10;
  });
  return m;
}

Result<uint64_t> OwnBytesIn(pid_t pid, std::string_view file) {
  auto smaps = ReadFile("/proc/" + std::to_string(pid) + "/smaps");
  if (!smaps.ok()) return NotFound("process " + std::to_string(pid) + " is gone");
  uint64_t kb = 0;
  ForEachMapping(*smaps, [&](const Mapping& map) {
    if (!file.empty() && map.name.find(file) != std::string_view::npos) kb += OwnKb(map);
  });
  return kb << 10;
}

Result<uint64_t> TcgCacheBytes(pid_t pid) {
  auto smaps = ReadFile("/proc/" + std::to_string(pid) + "/smaps");
  if (!smaps.ok()) return NotFound("process " + std::to_string(pid) + " is gone");
  uint64_t kb = 0;
  ForEachMapping(*smaps, [&kb](const Mapping& map) {
    if (map.perms == "rwxp") kb += map.rss_kb;
  });
  return kb << 10;
}

}  // namespace capsule
