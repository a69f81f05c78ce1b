// StdioCopier: connects one process's stdio (ProcessStdio) to the host ends
// containerd named. Lifecycle:
//   Open(spec)      Create/Exec time: resolve the strings, open the FIFOs or
//                   file, start a logging binary. Errors name the path.
//   Start(process)  once the process exists: one thread per output stream
//                   (Read -> host end) and one for stdin (host -> Write).
//   WaitOutput()    blocks until every output stream reached EOF, all of it
//                   was written out and its host end closed (CRI's ExecSync
//                   reads the FIFOs to EOF; containerd expects all output
//                   before the exit event).
//   CloseStdin()    containerd's CloseIO: forward what the stdin FIFO holds,
//                   then close the process's stdin.
//   ~StdioCopier()  cancels copies blocked on host ends, closes them, stops
//                   the logging binary, joins the threads. A thread stuck in
//                   ProcessStdio::Read (a guest that never answers) is left
//                   detached, owning the shared state, after kCopierStopTimeout.
// Stdin EOF on the FIFO (all writers closed) also closes the process's stdin;
// a process without stdin gets its stdin closed at Start, or by the agent
// when it made the process.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/common/status.h"
#include "shim/io/process_stdio.h"
#include "shim/io/stdio_uri.h"

namespace capsule::shim::io {

// Bytes asked for per Read (the agent's ReadStreamRequest.len).
inline constexpr size_t kReadChunkBytes = 32 * 1024;
// How long the destructor waits for copy threads before leaving any still
// blocked in ProcessStdio::Read to finish on their own.
inline constexpr std::chrono::milliseconds kCopierStopTimeout{5000};

class StdioCopier {
 public:
  static Result<std::unique_ptr<StdioCopier>> Open(const StdioSpec& spec);
  ~StdioCopier();
  StdioCopier(const StdioCopier&) = delete;
  StdioCopier& operator=(const StdioCopier&) = delete;

  // Starts copying; FAILED_PRECONDITION when already started.
  Status Start(ProcessStdioPtr process);
  // OK once all output is written and the host ends closed; DEADLINE_EXCEEDED
  // when `timeout` passes first; FAILED_PRECONDITION before Start.
  Status WaitOutput(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Idempotent; before Start it takes effect at Start.
  void CloseStdin();
  // False when the host has no stdin for the process (no stdin FIFO): its
  // stdin is closed at once, by Start unless the agent already did it when
  // it made the process (the request's stdin_closed), which
  // StdinClosedByAgent records.
  bool ForwardsStdin() const;
  void StdinClosedByAgent();

  const StdioTarget& target() const;

  // Opaque state shared with the copy threads (defined in the .cc).
  struct Shared;

 private:
  explicit StdioCopier(std::shared_ptr<Shared> shared);
  std::shared_ptr<Shared> shared_;
  // Joined by the destructor once they finished; detached if one is stuck.
  std::vector<std::thread> threads_;
};

using StdioCopierPtr = std::unique_ptr<StdioCopier>;

}  // namespace capsule::shim::io
