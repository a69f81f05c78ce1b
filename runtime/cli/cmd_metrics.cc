// `capsule-runtime metrics`: the node's Prometheus series. `serve` answers
// GET /metrics on --listen (127.0.0.1:9464 by default; loopback unless told
// otherwise, as the guest-derived series are the operator's business);
// `dump` prints one scrape.
#include <signal.h>

#include <cstdio>
#include <memory>

#include "runtime/cli/command.h"
#include "runtime/common/stop_signals.h"
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

int RunServe(const GlobalFlags& flags, const MetricsFlags& f) {
  auto cfg = LoadConfigFor(flags, "metrics serve");
  if (!cfg.ok()) return 1;
  auto listen = SplitListen(f.listen);
  if (!listen.ok()) return Fail("metrics serve", listen.status(), 2);
  BlockStopSignals();  // before the server's threads
  const config::Config config = *cfg;
  const metrics::CollectOptions o = Options(f);
  auto server = metrics::MetricsServer::Start(listen->first, listen->second,
                                              [config, o] { return metrics::CollectNodeMetrics(config, o); });
  if (!server.ok()) return Fail("metrics serve", server.status());
  std::printf("serving http://%s:%d/metrics\n", listen->first.c_str(), (*server)->port());
  std::fflush(stdout);
  WaitForStopSignal();
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
  Command dump;
  dump.app = metrics->add_subcommand("dump", "print one scrape");
  add_common(dump.app);
  dump.run = [&flags, f] {
    auto cfg = LoadConfigFor(flags, "metrics dump");
    if (!cfg.ok()) return 1;
    std::fputs(metrics::CollectNodeMetrics(*cfg, Options(*f)).c_str(), stdout);
    return 0;
  };
  return {std::move(serve), std::move(dump)};
}

}  // namespace capsule::cli
