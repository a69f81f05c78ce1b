// See process_usage.h.
#include "runtime/host/process_usage.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
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

namespace {

// The value of a "Key:   N kB" line of a /proc file, in bytes (0 if absent).
uint64_t KbField(const std::string& text, std::string_view key) {
  return std::strtoull(StatusField(text, key).c_str(), nullptr, 10) << 10;
}

}  // namespace

Result<ProcessMemory> ReadProcessMemory(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  auto status = ReadFile(base + "/status");
  auto rollup = ReadFile(base + "/smaps_rollup");
  if (!status.ok() || !rollup.ok()) return NotFound("process " + std::to_string(pid) + " is gone");
  ProcessMemory m;
  m.rss = KbField(*status, "VmRSS");
  m.rss_anon = KbField(*status, "RssAnon");
  m.rss_file = KbField(*status, "RssFile");
  m.rss_shmem = KbField(*status, "RssShmem");
  m.pss = KbField(*rollup, "Pss");
  m.private_bytes = KbField(*rollup, "Private_Clean") + KbField(*rollup, "Private_Dirty");
  return m;
}

Result<uint64_t> TcgCacheBytes(pid_t pid) {
  auto smaps = ReadFile("/proc/" + std::to_string(pid) + "/smaps");
  if (!smaps.ok()) return NotFound("process " + std::to_string(pid) + " is gone");
  uint64_t kb = 0;
  bool rwx = false;
  size_t at = 0;
  while (at < smaps->size()) {
    size_t end = smaps->find('\n', at);
    if (end == std::string::npos) end = smaps->size();
    const std::string_view line(smaps->data() + at, end - at);
    // A mapping's header starts with its address range; its fields follow.
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string_view::npos)
      rwx = line.find(" rwxp ") != std::string_view::npos;
    else if (rwx && line.starts_with("Rss:"))
      kb += std::strtoull(std::string(line.substr(4)).c_str(), nullptr, 10);
    at = end + 1;
  }
  return kb << 10;
}

}  // namespace capsule
