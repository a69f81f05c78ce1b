// containerd's stdio strings, as the shim receives them in Create/Exec:
// a FIFO path (no scheme), `file:///path` (stdout and stderr appended to one
// file), or `binary:///path?key=value&...` (a logging binary the shim runs).
// The scheme is taken from stdout, as containerd's pkg/process/io.go does.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::shim::io {

enum class StdioKind { kNull, kFifo, kFile, kBinary };

struct StdioSpec {
  std::string stdin_path;   // containerd's strings, verbatim ("" = none)
  std::string stdout_path;
  std::string stderr_path;
  bool terminal = false;    // one output stream (stdout) carries everything
  std::string container_id; // for binary loggers: $CONTAINER_ID
  std::string ns;           // for binary loggers: $CONTAINER_NAMESPACE
};

struct StdioTarget {
  StdioKind kind = StdioKind::kNull;
  std::string stdin_fifo;   // "" = no stdin
  std::string stdout_path;  // FIFO path, or the file for kFile, or ""
  std::string stderr_path;  // FIFO path, or "" (kFile: same as stdout_path)
  std::string binary;       // kBinary: the logging program
  std::vector<std::string> binary_args;  // kBinary: from the query
};

// Interprets a spec; INVALID_ARGUMENT names the bad field and value.
Result<StdioTarget> ResolveStdio(const StdioSpec& spec);

// A binary:// query as containerd turns it into argv (NewBinaryCmd): each
// key, then its first value ("k" alone gives "k", ""), percent-decoded with
// '+' as space. Keys keep their first-seen order (Go's map has none).
Result<std::vector<std::string>> QueryArgs(const std::string& query);

// Percent-decoding; `plus_is_space` for query components.
Result<std::string> PercentDecode(const std::string& in, bool plus_is_space);

}  // namespace capsule::shim::io
