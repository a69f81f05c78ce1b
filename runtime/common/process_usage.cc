// See process_usage.h.
#include "runtime/common/process_usage.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "runtime/common/file_util.h"

namespace capsule {

Result<ProcessUsageSample> ProcessUsage(pid_t pid) {
  const std::string base = "/proc/" + std::to_string(pid);
  auto statm = ReadFile(base + "/statm");
  auto stat = ReadFile(base + "/stat");
  if (!statm.ok() || !stat.ok()) return NotFound("process " + std::to_string(pid) + " is gone");
  ProcessUsageSample s;
  // statm: size resident shared ... (pages)
  const char* p = statm->c_str();
  char* end = nullptr;
  (void)std::strtoull(p, &end, 10);
  const unsigned long long resident = std::strtoull(end, &end, 10);
  s.rss_bytes = resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  // comm (field 2) may hold spaces and ')': fields resume after the last ')'.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return Internal("malformed " + base + "/stat");
  const char* f = stat->c_str() + close + 1;
  unsigned long long ticks = 0;
  for (int field = 3; field <= 15 && *f != '\0'; ++field) {
    while (*f == ' ') ++f;
    const unsigned long long v = std::strtoull(f, &end, 10);
    if (field == 14 || field == 15) ticks += v;
    while (*f != ' ' && *f != '\0') ++f;
  }
  s.cpu_seconds = static_cast<double>(ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return s;
}

}  // namespace capsule
