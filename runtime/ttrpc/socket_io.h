// Whole-buffer writes and interrupted-read handling for stream sockets.
// Writes use MSG_NOSIGNAL: a peer that hung up is an error, never SIGPIPE.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::ttrpc {

// Writes all of `data`, blocking as long as needed.
Status SendAll(int fd, std::string_view data);

// Writes all of `data` unless `deadline` passes first (DEADLINE_EXCEEDED).
// `*sent` tells how much went out: a partial write leaves the stream mid-frame.
Status SendAllBefore(int fd, std::string_view data,
                     std::optional<std::chrono::steady_clock::time_point> deadline, size_t* sent);


// read(2) retried on EINTR; 0 at EOF.
Result<size_t> ReadSome(int fd, char* buf, size_t len);

}  // namespace capsule::ttrpc
