// QMP wire format: QEMU writes one JSON object per line ("\r\n"); we send
// {"execute", "arguments", "id"} objects. QmpLineReader frames the byte
// stream, ParseQmpMessage classifies one line. Pure functions, no I/O: the
// fuzz target (tests/fuzz/qmp) drives exactly this code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/common/status.h"

namespace capsule::hypervisor {

// {"QMP": {"version": {"qemu": {...}, "package": ...}, "capabilities": [...]}}
struct QmpGreeting {
  int major = 0, minor = 0, micro = 0;
  std::string package;
  std::vector<std::string> capabilities;
  std::string VersionString() const;  // "7.2.22"
};

// {"return": ..., "id": N} or {"error": {"class", "desc"}, "id": N}
struct QmpReply {
  std::optional<uint64_t> id;  // absent when QEMU could not parse our input
  bool ok = true;
  nlohmann::json value;  // "return" payload when ok
  std::string error_class;
  std::string error_desc;
};

// {"event": NAME, "data": {...}, "timestamp": {"seconds", "microseconds"}}
struct QmpEvent {
  std::string name;
  nlohmann::json data;  // object (empty object when absent)
  int64_t seconds = 0;
  int64_t microseconds = 0;
};

using QmpMessage = std::variant<QmpGreeting, QmpReply, QmpEvent>;

// Largest message we accept; query-qmp-schema, the biggest reply QEMU 7.2
// sends, is about 200 KiB.
inline constexpr size_t kMaxQmpMessageBytes = 16u << 20;

// Splits a byte stream into lines. Feed() fails (and the stream is dead) once
// a line grows past kMaxQmpMessageBytes.
class QmpLineReader {
 public:
  Status Feed(std::string_view bytes);
  // The next complete line without its "\n" / "\r\n"; nullopt if none yet.
  std::optional<std::string> Next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;       // start of the first unread line
  size_t scanned_ = 0;   // bytes after pos_ already known to hold no '\n'
};

// INVALID_ARGUMENT for anything that is not one of the three message kinds,
// naming what was wrong ("QMP: event name is not a string").
Result<QmpMessage> ParseQmpMessage(std::string_view line);

// One command line, "\n"-terminated. `arguments` null/empty -> omitted.
std::string EncodeQmpCommand(std::string_view command, const nlohmann::json& arguments, uint64_t id);

// Maps a QMP error reply to a Status naming the command:
//   GenericError -> FAILED_PRECONDITION, CommandNotFound -> UNIMPLEMENTED,
//   DeviceNotFound -> NOT_FOUND, DeviceNotActive -> FAILED_PRECONDITION,
//   KVMMissingCap -> UNAVAILABLE, other -> UNKNOWN.
Status QmpErrorStatus(std::string_view command, const QmpReply& reply);

// For logs: compact JSON with invalid UTF-8 replaced, never throws.
std::string JsonForLog(const nlohmann::json& j, size_t max_chars = 512);

}  // namespace capsule::hypervisor
