// The process-wide log sink: level filter, target fd, line formatting.
#include "runtime/common/logging.h"

#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "runtime/common/printable.h"

namespace capsule::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::atomic<int> g_fd{STDERR_FILENO};

std::string Timestamp() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm utc{};
  gmtime_r(&ts.tv_sec, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                     ts.tv_nsec / 1000);
}

}  // namespace

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kTrace: return "trace";
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

std::optional<Level> ParseLevel(std::string_view name) {
  for (Level l : {Level::kTrace, Level::kDebug, Level::kInfo, Level::kWarn, Level::kError}) {
    if (LevelName(l) == name) return l;
  }
  if (name == "warning") return Level::kWarn;
  return std::nullopt;
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level)); }
Level GetLevel() { return static_cast<Level>(g_level.load()); }
void SetFd(int fd) { g_fd.store(fd); }
int GetFd() { return g_fd.load(); }

bool Enabled(Level level) { return static_cast<int>(level) >= g_level.load(); }

void Write(Level level, std::string_view component, std::string_view message) {
  std::string line = fmt::format("{} {} {}: ", Timestamp(), LevelName(level), component);
  // One event is one line: embedded newlines would split it for readers.
  std::string text(message.substr(0, kMaxMessageBytes));
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  // Messages quote guests, tenants and peers: their control bytes must not
  // reach the terminal or log viewer of whoever reads this.
  line += Printable(text, kMaxMessageBytes, /*keep_tabs=*/true);
  if (message.size() > text.size()) line += fmt::format("... ({} more bytes)", message.size() - text.size());
  line.push_back('\n');
  const int saved_errno = errno;
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(g_fd.load(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // nowhere to report a failing log sink
    p += n;
    left -= static_cast<size_t>(n);
  }
  errno = saved_errno;
}

}  // namespace capsule::log
