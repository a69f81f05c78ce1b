// kubectl port-forward through containerd 1.6's CRI streaming server, to an
// httpd on the pod's loopback, for a runc pod and a Capsule pod on one
// containerd: per-connection latency (PortForward URL, websocket, GET of a
// small page, to its last byte) CAPSULE_BENCH_RUNS times (default 20) after
// one warm-up, and the throughput of a 1 MiB body (5 times, from the
// PortForward call to the body's last byte). For Capsule the
// connection crosses the shim's nftables redirect and listener, vsock and
// the agent's forwarder. Prints p50/p90/max and the capsule/runc ratios.
// Asserts only that every transfer was whole. `make bench` runs it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "tests/e2e/bench_stats.h"
#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/streaming/channel_stream.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;
using streaming::ChannelOutput;
using streaming::ChannelStream;
using streaming::kV4ChannelProtocol;
using streaming::PortForwardDataChannel;
using streaming::PortForwardErrorChannel;

constexpr milliseconds kStreamTimeout{90000};
constexpr size_t kBigBytes = 1 << 20;
constexpr int kBigRuns = 5;

class PortForwardBench : public CriE2eTest {
 protected:
  // One forwarded HTTP/1.0 GET of a `want`-byte body: timed to its last
  // byte (the streaming server's own close of the session, the same for
  // both runtimes, is left out). The body's size, or why it failed.
  Result<size_t> Get(const std::string& pod_id, const std::string& path, size_t want, double* ms) {
    const auto t0 = Clock::now();
    ASSIGN_OR_RETURN(std::string url, cri_->PortForward(pod_id, {kHttpPort}));
    ASSIGN_OR_RETURN(ChannelStream stream, ChannelStream::Open(url, kV4ChannelProtocol, kStreamTimeout));
    RETURN_IF_ERROR(stream.ReadPortForwardHeaders({kHttpPort}, kStreamTimeout));
    RETURN_IF_ERROR(stream.Send(PortForwardDataChannel(0), "GET " + path + " HTTP/1.0\r\n\r\n"));
    ASSIGN_OR_RETURN(ChannelOutput out, stream.CollectUntil(
                                            [want](const ChannelOutput& o) {
                                              if (!o.Of(PortForwardErrorChannel(0)).empty()) return true;
                                              const std::string& d = o.Of(PortForwardDataChannel(0));
                                              const size_t body = d.find("\r\n\r\n");
                                              return body != std::string::npos && d.size() - body - 4 >= want;
                                            },
                                            kStreamTimeout));
    *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    (void)stream.Close(kStreamTimeout);
    if (!out.Of(PortForwardErrorChannel(0)).empty())
      return Unavailable("error channel: " + out.Of(PortForwardErrorChannel(0)));
    const std::string& data = out.Of(PortForwardDataChannel(0));
    const size_t body = data.find("\r\n\r\n");
    if (body == std::string::npos) return Unavailable("no HTTP response in " + data.substr(0, 200));
    return data.size() - body - 4;
  }

  // A pod (runc's when `handler` is "") whose httpd listens on 127.0.0.1 only.
  Result<std::string> ServingPod(const std::string& name, const std::string& handler) {
    const v1::PodSandboxConfig pod = Pod(name, v1::POD);
    auto pod_id = handler.empty() ? cri_->RunPod(pod, "") : RunPod(pod);
    if (!pod_id.ok()) return pod_id.status();
    ASSIGN_OR_RETURN(std::string web,
                     StartContainer(*pod_id, pod, "web",
                                    {"sh", "-c",
                                     fmt::format("mkdir -p /tmp/www; echo hello > /tmp/www/index.html; "
                                                 "dd if=/dev/zero of=/tmp/www/big bs=1024 count={} 2>/dev/null; "
                                                 "exec httpd -f -p 127.0.0.1:{} -h /tmp/www",
                                                 kBigBytes / 1024, kHttpPort)}));
    for (int i = 0; i < 60; ++i) {
      auto probe = cri_->ExecSync(web, {"wget", "-q", "-O", "/dev/null", fmt::format("http://127.0.0.1:{}/", kHttpPort)}, 30);
      if (probe.ok() && probe->exit_code == 0) return *pod_id;
      ::usleep(500 * 1000);
    }
    return DeadlineExceeded("httpd never answered in pod " + name);
  }

  struct Figures {
    Summary latency_ms;
    Summary mib_per_s;
  };

  Figures Measure(const std::string& pod_id, int runs) {
    std::vector<double> ms, mibs;
    for (int i = 0; i <= runs; ++i) {
      double took = 0;
      auto got = Get(pod_id, "/", 6, &took);
      EXPECT_TRUE(got.ok() && *got == 6) << (got.ok() ? std::to_string(*got) : got.status().ToString());
      if (i > 0) ms.push_back(took);
    }
    for (int i = 0; i < kBigRuns; ++i) {
      double took = 0;
      auto got = Get(pod_id, "/big", kBigBytes, &took);
      EXPECT_TRUE(got.ok() && *got == kBigBytes) << (got.ok() ? std::to_string(*got) : got.status().ToString());
      mibs.push_back(static_cast<double>(kBigBytes) / (1 << 20) / (took / 1000));
    }
    return {Summarize(ms), Summarize(mibs)};
  }
};

TEST_F(PortForwardBench, RuncAgainstCapsuleOnOneContainerd) {
  const char* runs_env = std::getenv("CAPSULE_BENCH_RUNS");
  const int runs = std::max(1, runs_env != nullptr ? std::atoi(runs_env) : 20);
  auto runc = ServingPod("pf-bench-runc", "");
  ASSERT_OK(runc);
  auto capsule = ServingPod("pf-bench-capsule", "capsule");
  ASSERT_OK(capsule);
  const Figures r = Measure(*runc, runs);
  const Figures c = Measure(*capsule, runs);
  auto line = [](const char* what, const Summary& s) {
    return fmt::format("  {:<34} p50 {:8.1f}  p90 {:8.1f}  max {:8.1f}\n", what, s.p50, s.p90, s.max);
  };
  std::cout << fmt::format("\nport-forward through CRI, {} connections and {} x 1 MiB each:\n", runs, kBigRuns)
            << line("runc    connection + GET / (ms)", r.latency_ms) << line("capsule connection + GET / (ms)", c.latency_ms)
            << line("runc    1 MiB body (MiB/s)", r.mib_per_s) << line("capsule 1 MiB body (MiB/s)", c.mib_per_s)
            << fmt::format("  capsule/runc at p50: latency {:.2f}x, throughput {:.2f}x\n",
                           c.latency_ms.p50 / r.latency_ms.p50, c.mib_per_s.p50 / r.mib_per_s.p50);
  for (const std::string& id : {*runc, *capsule}) {
    EXPECT_OK(cri_->StopPod(id));
    EXPECT_OK(cri_->RemovePod(id));
  }
}

}  // namespace
}  // namespace capsule::testing
