// The HTTP side of `capsule-runtime metrics serve`: cpp-httplib serving
// GET /metrics (the exposition text, collected per scrape) on one address,
// loopback by default.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/common/status.h"

namespace capsule::metrics {

class MetricsServer {
 public:
  using Collect = std::function<std::string()>;
  // Binds host:port (port 0: any free one) and serves on a thread of its own.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& host, int port, Collect collect);
  ~MetricsServer();  // stops serving and joins
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const;

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsule::metrics
