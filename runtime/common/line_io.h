// Short handshake lines on a stream socket (blocking or not), bounded in
// time and bytes: the agent token handshake and the port-forward request
// use them before raw bytes or gRPC take over the same stream, so a read
// never takes a byte past the line's '\n'.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::line_io {

using Deadline = std::chrono::steady_clock::time_point;

// Milliseconds left until `deadline`, at least 0: a poll(2) timeout.
int MillisLeft(Deadline deadline);

// Waits until `fd` has `events` (POLLIN, POLLOUT). DEADLINE_EXCEEDED says
// "<what>: no <waiting_for> in time".
Status WaitFor(int fd, short events, Deadline deadline, std::string_view what, std::string_view waiting_for);

// All of `data`. UNAVAILABLE when the peer closed or reset the stream.
Status WriteAll(int fd, std::string_view data, Deadline deadline, std::string_view what);

// One byte at a time up to and including '\n', at most `max` bytes; the
// line without a newline when `max` came first (the caller refuses it).
// UNAVAILABLE when the peer closed or reset the stream first.
Result<std::string> ReadLine(int fd, size_t max, Deadline deadline, std::string_view what);

}  // namespace capsule::line_io
