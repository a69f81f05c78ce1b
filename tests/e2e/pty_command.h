// A command run on a pseudo-terminal the test owns, as a user would run it
// in a terminal window: its stdin, stdout and stderr are the pty's slave,
// which is also its controlling terminal (so resizing the master sends it
// SIGWINCH), and the test types into and reads from the master. For
// `ctr run -t`, which refuses to run without a terminal.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule::testing {

class PtyCommand {
 public:
  // The window size is set before the command starts.
  static Result<PtyCommand> Start(const std::vector<std::string>& argv, unsigned short rows, unsigned short cols);

  // Types `text` (all of it) into the terminal.
  Status Write(const std::string& text);
  // Reads until the output since the last Consume() contains `needle`.
  // DEADLINE_EXCEEDED after `timeout`, UNAVAILABLE once the terminal hung
  // up first; both quote the output.
  Status WaitForOutput(const std::string& needle, std::chrono::milliseconds timeout);
  // Forgets the output read so far (later waits only see newer output).
  void Consume() { output_.clear(); }
  const std::string& output() const { return output_; }
  // TIOCSWINSZ on the master: the command gets SIGWINCH.
  Status Resize(unsigned short rows, unsigned short cols);
  // Exit code as a shell reports it; reads (and keeps) the output meanwhile.
  Result<int> Wait(std::chrono::milliseconds timeout);

 private:
  PtyCommand(ChildProcess child, UniqueFd master) : child_(std::move(child)), master_(std::move(master)) {}
  // Appends what the master has now; false once it hung up (EIO).
  bool Drain();

  ChildProcess child_;
  UniqueFd master_;
  std::string output_;
};

}  // namespace capsule::testing
