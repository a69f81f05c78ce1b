// `capsule-runtime metrics serve` in two processes. This one (root: it
// reads the state dir, dials the guests, reads QEMU's /proc) binds the
// address and only collects, when its front end asks. The front end
// (http_front.h: `capsule-runtime metrics http-front`, spawned with the
// listening socket and one end of a socket pair) answers HTTP as the user
// `nobody`, bounded in connections, bytes and time, and caches each
// collection for a short while.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/metrics/http_front.h"

namespace capsule::metrics {

struct MetricsServerOptions {
  // The front end's program and arguments; its fds and limits are appended
  // (FrontEndArguments).
  std::vector<std::string> front_end;
  HttpFrontOptions http;
  // Who the front end runs as when we are root: -1 looks up "nobody"
  // (65534 without one).
  int64_t front_end_uid = -1;
  int64_t front_end_gid = -1;
  // Called (on the collector's thread) when the front end exits.
  std::function<void()> on_front_end_exit;
};

// The fds the front end gets, and the arguments that tell it them and its
// limits; the http-front command parses the same flags.
inline constexpr int kFrontEndListenFd = 3;
inline constexpr int kFrontEndCollectorFd = 4;
std::vector<std::string> FrontEndArguments(const HttpFrontOptions& http);

class MetricsServer {
 public:
  using Collect = std::function<std::string()>;
  // Binds host:port (port 0: any free one), spawns the front end and
  // collects on a thread of its own.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& host, int port, Collect collect,
                                                      const MetricsServerOptions& options);
  ~MetricsServer();  // ends the front end and joins
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const;
  pid_t front_end_pid() const;

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsule::metrics
