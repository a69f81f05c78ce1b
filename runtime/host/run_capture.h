// Runs a short-lived program and returns what it printed (stdout and
// stderr together), for probes like `qemu -device help`.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule {

struct Captured {
  int exit_code = -1;  // as a shell reports it (128+signal when killed)
  std::string output;
};

// DEADLINE_EXCEEDED (the program killed) when it runs past `timeout`.
Result<Captured> RunAndCapture(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace capsule
