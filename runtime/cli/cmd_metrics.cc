// `capsule-runtime metrics`: the node's Prometheus series. `serve` answers
// GET /metrics on --listen (127.0.0.1:9464 by default; loopback unless told
// otherwise, as the guest-derived series are the operator's business)
// through `http-front`, its unprivileged HTTP side (hidden: only serve runs
// it); `dump` prints one scrape.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "runtime/cli/command.h"
#include "runtime/host/stop_signals.h"
#include "runtime/metrics/http_front.h"
#include "runtime/metrics/metrics_server.h"
#include "runtime/metrics/node_metrics.h"

namespace capsule::cli {
namespace {

struct MetricsFlags {
  std::string listen = "127.0.0.1:9464";
  bool no_guest = false;
  int guest_timeout_ms = 2000;
};

Result<std::pair<std::string, int>> SplitListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size())
    return InvalidArgument("--listen '" + listen + "' is not HOST:PORT");
  const std::string port = listen.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) > 65535)
    return InvalidArgument("--listen '" + listen + "': port '" + port + "' is not 0..65535");
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::make_pair(host, std::stoi(port));
}

metrics::CollectOptions Options(const MetricsFlags& f) {
  metrics::CollectOptions o;
  o.guest = !f.no_guest;
  o.guest_timeout = std::chrono::milliseconds(f.guest_timeout_ms);
  return o;
}

// This program, by its path so that ps names the front end; /proc/self/exe
// when the file was replaced since we started (an upgrade).
std::string SelfExe() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || !std::filesystem::exists(exe, ec)) return "/proc/self/exe";
  return exe.string();
}

int RunServe(const GlobalFlags& flags, const MetricsFlags& f) {
  auto cfg = LoadConfigFor(flags, "metrics serve");
  if (!cfg.ok()) return 1;
  auto listen = SplitListen(f.listen);
  if (!listen.ok()) return Fail("metrics serve", listen.status(), 2);
  BlockStopSignals();  // before the server's threads
  const config::Config config = *cfg;
  const metrics::CollectOptions o = Options(f);
  static std::atomic<bool> front_end_exited{false};
  metrics::MetricsServerOptions options;
  options.front_end = {SelfExe(), "metrics", "http-front"};
  options.on_front_end_exit = [] {
    front_end_exited = true;
    ::kill(::getpid(), SIGTERM);  // ends the wait below
  };
  auto server = metrics::MetricsServer::Start(
      listen->first, listen->second, [config, o] { return metrics::CollectNodeMetrics(config, o); }, options);
  if (!server.ok()) return Fail("metrics serve", server.status());
  std::printf("serving http://%s:%d/metrics\n", listen->first.c_str(), (*server)->port());
  std::fflush(stdout);
  WaitForStopSignal();
  if (front_end_exited) return Fail("metrics serve", Unavailable("the HTTP front end exited"));
  return 0;
}

struct FrontEndFlags {
  int listen_fd = -1;
  int collector_fd = -1;
  size_t max_connections = 0;
  size_t max_request_head = 0;
  int64_t request_timeout_ms = 0;
  int64_t response_timeout_ms = 0;
  int64_t cache_ms = 0;
};

int RunFrontEnd(const FrontEndFlags& f) {
  metrics::HttpFrontOptions o;
  o.max_connections = f.max_connections;
  o.max_request_head = f.max_request_head;
  o.request_timeout = std::chrono::milliseconds(f.request_timeout_ms);
  o.response_timeout = std::chrono::milliseconds(f.response_timeout_ms);
  o.cache_for = std::chrono::milliseconds(f.cache_ms);
  Status st = metrics::ServeHttpFront(f.listen_fd, f.collector_fd, o);
  if (!st.ok()) return Fail("metrics http-front", st);
  return 0;
}

}  // namespace

std::vector<Command> AddMetricsCommands(CLI::App& parent, const GlobalFlags& flags) {
  auto* metrics = parent.add_subcommand("metrics", "Prometheus metrics of this node's pods, VMs and pool");
  metrics->require_subcommand(1);
  auto f = std::make_shared<MetricsFlags>();
  auto add_common = [f](CLI::App* app) {
    app->add_flag("--no-guest", f->no_guest, "do not ask the guests for their memory and load");
    app->add_option("--guest-timeout-ms", f->guest_timeout_ms, "bound of each guest's answer")->capture_default_str();
  };
  Command serve;
  serve.app = metrics->add_subcommand("serve", "serve GET /metrics until SIGTERM");
  serve.app->add_option("--listen", f->listen, "HOST:PORT to listen on (PORT 0: any free one)")->capture_default_str();
  add_common(serve.app);
  serve.run = [&flags, f] { return RunServe(flags, *f); };
  Command front;
  auto ff = std::make_shared<FrontEndFlags>();
  front.app = metrics->add_subcommand("http-front", "the HTTP side of serve, which starts it");
  front.app->group("");  // hidden: an internal program
  front.app->add_option("--listen-fd", ff->listen_fd, "listening socket")->required()->check(CLI::NonNegativeNumber);
  front.app->add_option("--collector-fd", ff->collector_fd, "the collector's socket")->required()->check(
      CLI::NonNegativeNumber);
  front.app->add_option("--max-connections", ff->max_connections, "connections at once")->required()->check(
      CLI::PositiveNumber);
  front.app->add_option("--max-request-head", ff->max_request_head, "bytes of request line and headers")
      ->required()
      ->check(CLI::Range(64, 1 << 20));
  front.app->add_option("--request-timeout-ms", ff->request_timeout_ms, "for the request head")->required()->check(
      CLI::PositiveNumber);
  front.app->add_option("--response-timeout-ms", ff->response_timeout_ms, "for the answer")->required()->check(
      CLI::PositiveNumber);
  front.app->add_option("--cache-ms", ff->cache_ms, "how long a collection answers scrapes")->required()->check(
      CLI::NonNegativeNumber);
  front.run = [ff] { return RunFrontEnd(*ff); };
  Command dump;
  dump.app = metrics->add_subcommand("dump", "print one scrape");
  add_common(dump.app);
  dump.run = [&flags, f] {
    auto cfg = LoadConfigFor(flags, "metrics dump");
    if (!cfg.ok()) return 1;
    std::fputs(metrics::CollectNodeMetrics(*cfg, Options(*f)).c_str(), stdout);
    return 0;
  };
  return {std::move(serve), std::move(front), std::move(dump)};
}

}  // namespace capsule::cli
