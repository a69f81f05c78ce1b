// Running helper programs from tests: one-shot commands with captured output
// and a time limit, and long-running ones (`ctr events`) whose output a test
// reads until an expected line shows up. Children are killed and reaped on
// every path (ChildProcess).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
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

// A running command whose stdout and stderr (merged) the test reads. A
// thread of its own takes the output in as it comes: a chatty command (a
// daemon logging every QMP call) must never block on a full pipe while the
// test does something else for minutes, or it stalls mid-work and cannot
// even exit when told to.
class StreamingCommand {
 public:
  static Result<StreamingCommand> Start(const std::vector<std::string>& argv,
                                        std::optional<std::vector<std::string>> env = std::nullopt);
  StreamingCommand(StreamingCommand&&) noexcept = default;
  StreamingCommand& operator=(StreamingCommand&&) = delete;
  ~StreamingCommand();

  // Waits until the output so far contains `needle`; returns all of it.
  // DEADLINE_EXCEEDED if `timeout` passes, UNAVAILABLE if the command closes
  // its output (exits) first; both messages quote the output.
  Result<std::string> WaitForOutput(const std::string& needle, std::chrono::milliseconds timeout);
  std::string output() const;
  pid_t pid() const { return child_.pid(); }
  // SIGTERM, then SIGKILL after `grace` (its output still taken in
  // meanwhile); reaps, then stops reading.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  Status Signal(int sig) { return child_.Signal(sig); }
  // Waits for exit; the raw wait status.
  Result<int> Wait(std::chrono::milliseconds timeout);

 private:
  struct Output {
    std::mutex mu;
    std::condition_variable cv;
    std::string text;
    bool closed = false;  // end of file: the command (and all it started) closed it
  };
  StreamingCommand(ChildProcess child, UniqueFd out);
  void StopReading();

  ChildProcess child_;
  std::shared_ptr<Output> output_;
  UniqueFd stop_read_, stop_;  // a byte in stop_ ends the reader (after it took in what is there)
  std::thread reader_;
};

}  // namespace capsule::testing
