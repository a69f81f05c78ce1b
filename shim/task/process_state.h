// The lifecycle of one process (a container's init or an exec), as
// containerd's runc shim models it (process/init_state.go):
//   created --start--> running --exit--> stopped --delete--> deleted
//   created --delete--> deleted      (never started)
//   created --exit--> stopped        (killed, or its VM died, before start)
// A container is paused on top of that (its init stays running).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::shim::task {

enum class ProcessState { kCreated, kRunning, kStopped, kDeleted };

std::string_view ProcessStateName(ProcessState state);

// OK when `from` may become `to`; else FAILED_PRECONDITION naming the
// object, the action and both states: "start exec e1 of c1: cannot go from
// stopped to running".
Status CheckTransition(ProcessState from, ProcessState to, std::string_view what);

// How a process ended.
struct ExitInfo {
  uint32_t status = 0;        // exit code, or 128+signal
  int64_t exited_at_ns = 0;   // wall clock, nanoseconds since the epoch
  bool oom_killed = false;
};

// 128 + SIGKILL: what a process that died with its VM reports.
inline constexpr uint32_t kKilledExitStatus = 137;
// What a process whose exit could not be learned reports (runc: 255).
inline constexpr uint32_t kUnknownExitStatus = 255;
// What a process that could not be started reports, as a shell does: 127
// when its executable was not found, 126 when it could not be run.
inline constexpr uint32_t kNotFoundExitStatus = 127;
inline constexpr uint32_t kCannotRunExitStatus = 126;

int64_t NowUnixNanos();

}  // namespace capsule::shim::task
