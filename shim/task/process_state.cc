// See process_state.h.
#include "runtime/common/reasons.h"
#include "shim/task/process_state.h"

#include <time.h>

#include <fmt/format.h>

namespace capsule::shim::task {

std::string_view ProcessStateName(ProcessState state) {
  switch (state) {
    case ProcessState::kCreated: return "created";
    case ProcessState::kRunning: return "running";
    case ProcessState::kStopped: return "stopped";
    case ProcessState::kDeleted: return "deleted";
  }
  return "unknown";
}

Status CheckTransition(ProcessState from, ProcessState to, std::string_view what) {
  using S = ProcessState;
  const bool ok = (from == S::kCreated && (to == S::kRunning || to == S::kStopped || to == S::kDeleted)) ||
                  (from == S::kRunning && to == S::kStopped) || (from == S::kStopped && to == S::kDeleted);
  if (ok) return Status::Ok();
  return FailedPrecondition(
             fmt::format("{}: cannot go from {} to {}", what, ProcessStateName(from), ProcessStateName(to)))
      .WithReason(reason::kWrongState);
}

int64_t NowUnixNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace capsule::shim::task
