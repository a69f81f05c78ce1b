// Running helper programs from tests: one-shot commands with captured output
// and a time limit, and long-running ones (`ctr events`) whose output a test
// reads until an expected line shows up. Children are killed and reaped on
// every path (ChildProcess).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule::testing {

struct CommandResult {
  int exit_code = -1;  // as a shell reports it (128+signal)
  std::string out;
  std::string err;
  bool ok() const { return exit_code == 0; }
};

// The current environment with `overrides` applied (KEY=VALUE entries
// replaced or added).
std::vector<std::string> EnvironmentWith(const std::vector<std::pair<std::string, std::string>>& overrides);

// Runs argv to completion. DEADLINE_EXCEEDED (with the output so far in the
// message) if it outlives `timeout`; the child is killed then.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout,
                                 std::optional<std::vector<std::string>> env = std::nullopt);

// A running command whose stdout and stderr (merged) the test reads.
class StreamingCommand {
 public:
  static Result<StreamingCommand> Start(const std::vector<std::string>& argv,
                                        std::optional<std::vector<std::string>> env = std::nullopt);

  // Reads until the accumulated output contains `needle`; returns all output
  // so far. DEADLINE_EXCEEDED if `timeout` passes, UNAVAILABLE if the command
  // exits first; both messages quote the output.
  Result<std::string> WaitForOutput(const std::string& needle, std::chrono::milliseconds timeout);
  const std::string& output() const { return output_; }
  // Takes in what the command printed so far without waiting, so a chatty
  // command never blocks on a full pipe between waits.
  void ReadAvailable();
  pid_t pid() const { return child_.pid(); }
  // SIGTERM, then SIGKILL after `grace`; reaps.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  Status Signal(int sig) { return child_.Signal(sig); }
  // Waits for exit (taking in its output meanwhile); the raw wait status.
  Result<int> Wait(std::chrono::milliseconds timeout);

 private:
  StreamingCommand(ChildProcess child, UniqueFd out) : child_(std::move(child)), out_(std::move(out)) {}
  ChildProcess child_;
  UniqueFd out_;
  std::string output_;
};

}  // namespace capsule::testing
