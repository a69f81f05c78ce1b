// Transition table of the container lifecycle.
#include "agent/engine/container_state.h"
#include "runtime/common/reasons.h"

namespace capsule::engine {

std::string_view StateName(ContainerState state) {
  switch (state) {
    case ContainerState::kCreated: return "created";
    case ContainerState::kRunning: return "running";
    case ContainerState::kPaused: return "paused";
    case ContainerState::kStopped: return "stopped";
  }
  return "unknown";
}

Status CheckTransition(std::string_view container_id, ContainerState from, ContainerState to) {
  using S = ContainerState;
  bool ok = false;
  switch (to) {
    case S::kRunning: ok = from == S::kCreated || from == S::kPaused; break;  // start, resume
    case S::kPaused: ok = from == S::kRunning; break;
    case S::kStopped: ok = from != S::kStopped; break;  // init exited or was killed
    case S::kCreated: ok = false; break;                // only at construction
  }
  if (ok) return Status::Ok();
  return FailedPrecondition("container " + std::string(container_id) + ": cannot go from " +
                            std::string(StateName(from)) + " to " + std::string(StateName(to)))
      .WithReason(reason::kWrongState);
}

}  // namespace capsule::engine
