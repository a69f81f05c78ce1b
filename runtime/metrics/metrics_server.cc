// See metrics_server.h. httplib's header stays in this file.
#include "runtime/metrics/metrics_server.h"

#include <httplib.h>

#include <thread>

#include "runtime/common/logging.h"

namespace capsule::metrics {
namespace {
const log::Logger kLog("metrics");
}  // namespace

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host, int port, Collect collect) {
  auto impl = std::make_unique<Impl>();
  impl->server.Get("/metrics", [collect](const httplib::Request&, httplib::Response& res) {
    res.set_content(collect(), "text/plain; version=0.0.4; charset=utf-8");
  });
  impl->server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("capsule-runtime metrics: GET /metrics\n", "text/plain");
  });
  if (port == 0) {
    impl->port = impl->server.bind_to_any_port(host);
    if (impl->port <= 0) return Unavailable("metrics: cannot listen on " + host + " (any port)");
  } else {
    if (!impl->server.bind_to_port(host, port))
      return Unavailable("metrics: cannot listen on " + host + ":" + std::to_string(port));
    impl->port = port;
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  kLog.Info("serving metrics on http://{}:{}/metrics", host, impl->port);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MetricsServer::port() const { return impl_->port; }

}  // namespace capsule::metrics
