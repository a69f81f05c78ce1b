// ProcessStdio: the stdio of one process that runs somewhere else (in the
// guest, behind the agent's ReadStdout/ReadStderr/WriteStdin/CloseStdin
// RPCs). The shim's I/O copier moves bytes between it and the host ends
// containerd gave (FIFOs, a file, a logging binary). Tests use a fake.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::shim::io {

enum class OutputStream { kStdout, kStderr };

struct ReadChunk {
  std::string data;  // may be empty only together with eof
  bool eof = false;  // the stream has ended; no later Read returns data
};

class ProcessStdio {
 public:
  virtual ~ProcessStdio() = default;

  // Blocks until `stream` has data (at most `max_bytes`) or has ended. Must
  // return, with eof or an error, once the process's stream closes or the
  // process (or its VM) is gone; the copier treats an error as the end.
  virtual Result<ReadChunk> Read(OutputStream stream, size_t max_bytes) = 0;
  // Writes all of `data` to the process's stdin (blocking).
  virtual Status Write(std::string_view data) = 0;
  // Closes the process's stdin so it reads EOF. Called at most once.
  virtual Status CloseStdin() = 0;
};

// Shared: the copier's threads and the process object both hold it.
using ProcessStdioPtr = std::shared_ptr<ProcessStdio>;

}  // namespace capsule::shim::io
