// Leveled logging shared by every Capsule program: one line per event,
// "2026-01-02T03:04:05.678901Z info ttrpc: message", written with a single
// write(2) so lines from threads and processes sharing the fd never interleave.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace capsule::log {

enum class Level { kTrace = 0, kDebug, kInfo, kWarn, kError };

std::string_view LevelName(Level level);
// Parses "trace|debug|info|warn|error"; nullopt for anything else.
std::optional<Level> ParseLevel(std::string_view name);

// Process-wide sink. Defaults: stderr, info.
void SetLevel(Level level);
Level GetLevel();
// The logger writes to fd but does not own it.
void SetFd(int fd);
int GetFd();

bool Enabled(Level level);
// A message longer than this is cut (saying by how much).
inline constexpr size_t kMaxMessageBytes = 16 * 1024;
// One line: newlines become spaces, other control bytes \xNN (printable.h).
void Write(Level level, std::string_view component, std::string_view message);

// A named source of log lines; cheap to copy, usually one per file or object.
class Logger {
 public:
  explicit Logger(std::string component) : component_(std::move(component)) {}

  const std::string& component() const { return component_; }

  template <typename... Args>
  void Log(Level level, fmt::format_string<Args...> f, Args&&... args) const {
    if (!Enabled(level)) return;
    Write(level, component_, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void Trace(fmt::format_string<Args...> f, Args&&... args) const {
    Log(Level::kTrace, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Debug(fmt::format_string<Args...> f, Args&&... args) const {
    Log(Level::kDebug, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Info(fmt::format_string<Args...> f, Args&&... args) const {
    Log(Level::kInfo, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Warn(fmt::format_string<Args...> f, Args&&... args) const {
    Log(Level::kWarn, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Error(fmt::format_string<Args...> f, Args&&... args) const {
    Log(Level::kError, f, std::forward<Args>(args)...);
  }

 private:
  std::string component_;
};

}  // namespace capsule::log
