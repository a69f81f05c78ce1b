// `kubectl port-forward` to a Capsule pod through containerd 1.6's CRI:
// PortForward's URL, driven over the streaming server's websocket path
// (tests/support/streaming), makes containerd dial localhost:PORT in the
// pod's netns; the shim's nftables redirect and listener carry it over
// vsock to the agent, which connects to the port on the guest's loopback.
// The server in the pod listens on 127.0.0.1 only, so nothing else could
// reach it. One VM boot; the fixture checks nothing is left after it.
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/network/loopback_redirect.h"
#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/streaming/channel_stream.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using streaming::ChannelOutput;
using streaming::ChannelStream;
using streaming::kV4ChannelProtocol;
using streaming::PortForwardDataChannel;
using streaming::PortForwardErrorChannel;

constexpr milliseconds kStreamTimeout{90000};
constexpr size_t kBigBytes = 1 << 20;

class CriPortForwardE2eTest : public CriE2eTest {
 protected:
  // One forwarded connection: an HTTP/1.0 GET of `path` through a fresh
  // PortForward session; what came back on the port's data and error
  // channels once the server closed.
  Result<ChannelOutput> GetThroughPortForward(const std::string& pod_id, uint16_t port, const std::string& path) {
    ASSIGN_OR_RETURN(std::string url, cri_->PortForward(pod_id, {port}));
    ASSIGN_OR_RETURN(ChannelStream stream, ChannelStream::Open(url, kV4ChannelProtocol, kStreamTimeout));
    RETURN_IF_ERROR(stream.ReadPortForwardHeaders({port}, kStreamTimeout));
    RETURN_IF_ERROR(stream.Send(PortForwardDataChannel(0), "GET " + path + " HTTP/1.0\r\n\r\n"));
    return stream.CollectUntilClose(kStreamTimeout);
  }
};

TEST_F(CriPortForwardE2eTest, PortForwardReachesAServerOnTheGuestsLoopbackManyAtOnceAndAClosedPortIsAnError) {
  const v1::PodSandboxConfig pod = Pod("pf-pod", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto web = StartContainer(*pod_id, pod, "web",
                            {"sh", "-c",
                             fmt::format("mkdir -p /tmp/www; echo hello-through-port-forward > /tmp/www/index.html; "
                                         "dd if=/dev/urandom of=/tmp/www/big bs=1024 count={} 2>/dev/null; "
                                         "exec httpd -f -p 127.0.0.1:{} -h /tmp/www",
                                         kBigBytes / 1024, kHttpPort)});
  ASSERT_OK(web);
  bool up = false;
  for (int i = 0; i < 60 && !up; ++i) {
    auto probe = cri_->ExecSync(*web, {"wget", "-q", "-O", "/dev/null", fmt::format("http://127.0.0.1:{}/", kHttpPort)}, 30);
    up = probe.ok() && probe->exit_code == 0;
    if (!up) ::usleep(500 * 1000);
  }
  ASSERT_TRUE(up) << "httpd never answered on the guest's loopback";

  // Only the loopback listens: the pod's IP does not reach the server.
  auto status = cri_->PodStatus(*pod_id);
  ASSERT_OK(status);
  EXPECT_FALSE(HttpGet(status->status().network().ip(), kHttpPort, milliseconds(5000)).ok());

  // The redirect lives in the pod's netns (the sandbox spec's) and nowhere else.
  auto verbose = cri_->PodStatus(*pod_id, /*verbose=*/true);
  ASSERT_OK(verbose);
  std::string netns;
  const auto info = nlohmann::json::parse(verbose->info().at("info"), nullptr, false);
  for (const auto& ns : info.value("/runtimeSpec/linux/namespaces"_json_pointer, nlohmann::json::array())) {
    if (ns.value("type", "") == "network") netns = ns.value("path", "");
  }
  ASSERT_FALSE(netns.empty()) << "no network namespace in the pod's spec";
  const std::string list = std::string("list table inet ") + network::kPortForwardTable + "\n";
  EXPECT_OK(network::RunNftablesIn(netns, list)) << netns;
  EXPECT_FALSE(network::RunNftablesIn("/proc/self/ns/net", list).ok()) << "the redirect is in the host's netns";

  auto page = GetThroughPortForward(*pod_id, kHttpPort, "/");
  ASSERT_OK(page);
  EXPECT_NE(page->Of(PortForwardDataChannel(0)).find("hello-through-port-forward"), std::string::npos)
      << page->Of(PortForwardDataChannel(0));
  EXPECT_EQ(page->Of(PortForwardErrorChannel(0)), "");

  // Many at once, one of them a 1 MiB body (vsock flow control both ways).
  constexpr int kSessions = 12;
  std::vector<std::string> results(kSessions);
  std::vector<std::thread> sessions;
  for (int i = 0; i < kSessions; ++i) {
    sessions.emplace_back([&, i] {
      auto got = GetThroughPortForward(*pod_id, kHttpPort, i == 0 ? "/big" : "/");
      if (!got.ok()) {
        results[i] = got.status().ToString();
        return;
      }
      const std::string& data = got->Of(PortForwardDataChannel(0));
      const size_t body = data.find("\r\n\r\n");
      if (!got->Of(PortForwardErrorChannel(0)).empty()) {
        results[i] = "error channel: " + got->Of(PortForwardErrorChannel(0));
      } else if (i == 0 && (body == std::string::npos || data.size() - body - 4 != kBigBytes)) {
        results[i] = fmt::format("/big: {} bytes in all, body at {}", data.size(), body);
      } else if (i != 0 && data.find("hello-through-port-forward") == std::string::npos) {
        results[i] = "no page in: " + data.substr(0, 200);
      }
    });
  }
  for (auto& t : sessions) t.join();
  for (int i = 0; i < kSessions; ++i) EXPECT_EQ(results[i], "") << "session " << i;

  // A port nothing listens on in the guest: an error on the port's error
  // channel and no data, as on a node (there, a refused connect).
  auto closed = GetThroughPortForward(*pod_id, 9, "/");
  ASSERT_OK(closed);
  EXPECT_EQ(closed->Of(PortForwardDataChannel(0)), "");
  EXPECT_NE(closed->Of(PortForwardErrorChannel(0)).find("reset by peer"), std::string::npos)
      << "error channel: " << closed->Of(PortForwardErrorChannel(0));
  EXPECT_NE(ctrd_->LogTail(8 << 20).find("port-forward to 127.0.0.1:9 in the guest refused"), std::string::npos);

  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

}  // namespace
}  // namespace capsule::testing
