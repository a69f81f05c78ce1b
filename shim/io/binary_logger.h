// A containerd logging binary (binary:// stdio). Protocol from containerd's
// pkg/process/io.go (NewBinaryIO) and io_util.go (NewBinaryCmd): the program
// runs with only CONTAINER_ID and CONTAINER_NAMESPACE in its environment,
// /dev/null as stdio, the read ends of the stdout and stderr pipes as fds 3
// and 4, and the write end of a "ready" pipe as fd 5, which it writes to or
// closes once it is ready. The shim writes the process's output into the
// pipes; closing them is the logger's EOF.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule::shim::io {

// How long a logger may take to signal ready (containerd waits forever;
// a bound turns a hung logger into a clear Create error).
inline constexpr std::chrono::milliseconds kLoggerReadyTimeout{30000};
// After its pipes close: time to exit on its own, then after SIGTERM
// (containerd's binaryIOProcTermTimeout, 12 s) before SIGKILL.
inline constexpr std::chrono::milliseconds kLoggerEofGrace{2000};
inline constexpr std::chrono::milliseconds kLoggerTermGrace{12000};

class BinaryLogger {
 public:
  static Result<std::unique_ptr<BinaryLogger>> Start(const std::string& binary,
                                                     const std::vector<std::string>& args,
                                                     const std::string& container_id,
                                                     const std::string& ns);
  ~BinaryLogger();  // Stop()
  BinaryLogger(const BinaryLogger&) = delete;
  BinaryLogger& operator=(const BinaryLogger&) = delete;

  // The write ends (non-blocking, CLOEXEC); each can be taken once.
  UniqueFd TakeStdout() { return std::move(stdout_w_); }
  UniqueFd TakeStderr() { return std::move(stderr_w_); }

  pid_t pid() const { return child_.pid(); }

  // Closes pipe ends still held, lets the logger drain and exit, escalating
  // to SIGTERM and SIGKILL; reaps it. Idempotent.
  void Stop();

 private:
  BinaryLogger(ChildProcess child, UniqueFd out, UniqueFd err)
      : child_(std::move(child)), stdout_w_(std::move(out)), stderr_w_(std::move(err)) {}

  ChildProcess child_;
  UniqueFd stdout_w_;
  UniqueFd stderr_w_;
  bool stopped_ = false;
};

}  // namespace capsule::shim::io
