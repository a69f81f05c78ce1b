// See proc_stat.h.
#include "runtime/host/proc_stat.h"

#include <algorithm>
#include <charconv>

#include "runtime/common/file_util.h"

namespace capsule {

Result<ProcStat> ParseProcStat(std::string_view text, const std::string& what) {
  // comm (field 2) may hold spaces and ')': fields resume after the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return Internal("malformed " + what + ": no ')' after the command name");
  std::string_view rest = text.substr(close + 1);
  ProcStat s;
  for (int field = 3; field <= 22; ++field) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const size_t end = std::min(rest.find(' '), rest.size());
    const std::string_view token = rest.substr(0, end);
    if (token.empty()) return Internal("malformed " + what + ": field " + std::to_string(field) + " is missing");
    if (field == 3) {
      s.state = token.front();
    } else if (field == 9 || field == 14 || field == 15 || field == 22) {
      uint64_t v = 0;
      auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
      if (ec != std::errc() || ptr != token.data() + token.size())
        return Internal("malformed " + what + ": field " + std::to_string(field) + " is not a number");
      if (field == 9) {
        s.flags = static_cast<uint32_t>(v);
      } else {
        (field == 14 ? s.utime_ticks : field == 15 ? s.stime_ticks : s.start_time) = v;
      }
    }
    rest.remove_prefix(end);
  }
  return s;
}

Result<ProcStat> ReadProcStat(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  auto text = ReadFile(path);
  if (!text.ok()) return NotFound("process " + std::to_string(pid) + " is gone (" + text.status().message() + ")");
  return ParseProcStat(*text, path);
}

bool ProcessExiting(pid_t pid) {
  auto st = ReadProcStat(pid);
  return !st.ok() || st->state == 'Z' || st->state == 'X' || (st->flags & kProcFlagExiting) != 0;
}

Result<std::vector<std::string>> ReadCmdline(pid_t pid) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  if (!text.ok()) return NotFound("process " + std::to_string(pid) + " is gone (" + text.status().message() + ")");
  std::vector<std::string> args;
  std::string_view rest = *text;
  while (!rest.empty()) {
    const size_t nul = std::min(rest.find('\0'), rest.size());
    args.emplace_back(rest.substr(0, nul));
    rest.remove_prefix(std::min(nul + 1, rest.size()));
  }
  return args;
}

}  // namespace capsule
