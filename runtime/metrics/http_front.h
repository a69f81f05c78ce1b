// The HTTP front end of `capsule-runtime metrics serve`: a process of its
// own, unprivileged, that holds the listening socket and answers scrapes,
// while its root parent (metrics_server.h) only collects when asked. Whoever
// reaches the address (a local user, a hostNetwork pod, every pod once
// --listen is routable) talks to this loop only, and every resource it can
// make the loop hold is bounded:
//   - GET and HEAD only (405); a request with a body is refused (413), its
//     bytes are never kept;
//   - the request head (request line and headers) is at most
//     max_request_head bytes (431) and must arrive within request_timeout;
//   - at most max_connections at once: past that, the connection that has
//     waited longest for its request is closed for the newcomer, so idle
//     dialers cannot keep a scrape out;
//   - one request per connection (Connection: close), each answer written
//     within response_timeout;
//   - one collection at a time, shared by every scrape waiting for it, and
//     kept for cache_for, so a scrape storm is not a storm of guest calls.
// One thread, one poll loop: nothing a client does blocks another.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/common/status.h"

namespace capsule::metrics {

struct HttpFrontOptions {
  size_t max_connections = 64;
  size_t max_request_head = 8192;
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds response_timeout{15000};
  std::chrono::milliseconds cache_for{2000};
};

// Between the front end and its collector, over a stream socket: the front
// end writes kCollectRequest; the collector answers with the text's length
// (8 bytes, little-endian) and the text.
inline constexpr char kCollectRequest = 'C';
inline constexpr size_t kCollectLengthBytes = 8;
inline constexpr uint64_t kMaxCollectionBytes = uint64_t{256} << 20;

// Serves `listen_fd` (a listening TCP socket) until the collector closes
// `collector_fd`: OK then. An error the loop cannot go on from (the
// collector broke the framing, poll failed) is returned.
Status ServeHttpFront(int listen_fd, int collector_fd, const HttpFrontOptions& options);

}  // namespace capsule::metrics
