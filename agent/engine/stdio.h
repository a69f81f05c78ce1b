// ProcessIo: the agent's end of one process's stdin/stdout/stderr, either
// three pipes or one pty master. Reads block until data or end of stream
// (the host's pace is the back-pressure); end of stream is reported only
// after every writer (the process and anything that inherited its stdout)
// closed it and all data was read. Shutdown() wakes every blocked call.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "agent/engine/cancel.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::engine {

enum class Stream { kStdout, kStderr };

struct ReadResult {
  std::string data;
  bool eof = false;
};

// The child's ends, handed to Launch (closed in the agent after fork).
struct ChildStdio {
  UniqueFd in, out, err;
};

class ProcessIo {
 public:
  // Pipes; `child` receives the ends for the process.
  static Result<std::shared_ptr<ProcessIo>> CreatePipes(ChildStdio* child);
  // A pty: the master arrives later from the container process (SetConsole).
  static Result<std::shared_ptr<ProcessIo>> CreateTerminal();

  ~ProcessIo();
  ProcessIo(const ProcessIo&) = delete;
  ProcessIo& operator=(const ProcessIo&) = delete;

  bool terminal() const { return terminal_; }
  void SetConsole(UniqueFd master);

  // Up to `max` bytes (at least 1 unless eof). A tty has no stderr: eof at once.
  // CANCELLED once `cancel` reports it (nothing was consumed then).
  Result<ReadResult> Read(Stream stream, size_t max, const CancelCheck& cancel = {});
  // Writes all of `data` (blocking while the pipe is full). CANCELLED once
  // `cancel` reports it; the bytes written until then stay written.
  Result<size_t> Write(std::string_view data, const CancelCheck& cancel = {});
  // Pipes: closes the write end, the process reads eof. Tty: sends VEOF.
  Status CloseStdin();
  Status Resize(uint32_t rows, uint32_t cols);

  // Wakes blocked calls; later reads report eof, writes fail. Idempotent.
  void Shutdown();
  // Both output streams reached eof (all output was delivered).
  bool drained() const;
  // Closes every fd (after Shutdown or drain): keeps an exited exec cheap.
  void Release();

 private:
  struct Channel {
    mutable std::mutex mu;  // serialises readers/writers of this stream
    UniqueFd fd;            // guarded by mu
    std::atomic<bool> eof = false;  // written under mu; read lock-free by drained()
  };

  ProcessIo(bool terminal, UniqueFd cancel) : terminal_(terminal), cancel_(std::move(cancel)) {}
  enum class Readiness { kReady, kShutdown, kCancelled };
  // Waits until fd is ready for `events`, Shutdown, or `cancel`.
  Result<Readiness> WaitReady(int fd, short events, const CancelCheck& cancel);
  Result<ReadResult> ReadChannel(Channel& ch, size_t max, const CancelCheck& cancel);

  const bool terminal_;
  // eventfd, readable after Shutdown. Closed by Release while it holds every
  // channel lock (pollers hold one) and cancel_mu_ (Shutdown holds it).
  std::mutex cancel_mu_;
  UniqueFd cancel_;
  Channel stdin_;    // pipe write end, or a dup of the pty master
  Channel stdout_;   // pipe read end, or the pty master
  Channel stderr_;   // pipe read end (unused for a tty)
  std::mutex console_mu_;
  UniqueFd console_;  // guarded by console_mu_; a dup of the master for ioctls
};

using ProcessIoPtr = std::shared_ptr<ProcessIo>;

}  // namespace capsule::engine
