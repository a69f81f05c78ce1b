// `kubectl port-forward` for a VM pod without the VM: the shim's listener
// (PortForwardListener, with its nftables redirect) in a pod netns made as
// CNI makes one, and the agent's real forwarder (agent/forward) on a unix
// socket standing in for the guest's vsock port, with the agent token
// handshake. The "guest" is this test program's own netns, where an echo
// server listens on 127.0.0.1 and ::1. Clients connect to localhost:PORT
// inside the pod netns, as containerd's PortForward does. The same path
// through containerd, QEMU and a real guest is tests/e2e (CriStreaming).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "agent/forward/port_forwarder.h"
#include "runtime/agentclient/agent_client.h"
#include "runtime/common/file_util.h"
#include "runtime/common/inet_sockaddr.h"
#include "runtime/common/unix_stream.h"
#include "runtime/network/loopback_redirect.h"
#include "runtime/network/netns.h"
#include "runtime/network/port_forward_listener.h"
#include "runtime/wire/agent_auth.h"
#include "runtime/wire/port_forward_wire.h"
#include "tests/network/test_netns.h"
#include "tests/support/status_matchers.h"

namespace capsule::network {
namespace {

using std::chrono::milliseconds;
using testing::IpIn;
using testing::TestNetns;

// An echo server on 127.0.0.1 and [::1] (same port) in this program's netns:
// echoes what it reads, and closes once the client half-closed.
class EchoServer {
 public:
  EchoServer() {
    for (int family : {AF_INET, AF_INET6}) {
      UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
      int one = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
      const InetSockaddr addr = LoopbackSockaddr(family, port_);
      EXPECT_EQ(::bind(fd.get(), addr.get(), addr.len), 0) << std::strerror(errno);
      EXPECT_EQ(::listen(fd.get(), 128), 0);
      if (family == AF_INET) {
        sockaddr_in sa{};
        socklen_t l = sizeof sa;
        ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &l);
        port_ = ntohs(sa.sin_port);
      }
      listeners_.push_back(std::move(fd));
    }
    for (auto& l : listeners_) threads_.emplace_back([this, fd = l.get()] { Serve(fd); });
  }
  ~EchoServer() {
    stop_ = true;
    for (auto& l : listeners_) ::shutdown(l.get(), SHUT_RDWR);
    for (auto& t : threads_) t.join();
  }
  uint16_t port() const { return port_; }

 private:
  void Serve(int listen_fd) {
    std::vector<std::thread> conns;
    while (!stop_) {
      int c = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) break;
      conns.emplace_back([c] {
        UniqueFd fd(c);
        char buf[16384];
        for (;;) {
          ssize_t n = ::read(fd.get(), buf, sizeof buf);
          if (n <= 0) break;
          if (::send(fd.get(), buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
        }
      });
    }
    for (auto& t : conns) t.join();
  }
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<UniqueFd> listeners_;
  std::vector<std::thread> threads_;
};

// A TCP socket made inside `netns`: what it connects to is that netns's.
UniqueFd SocketIn(const std::string& netns, int family) {
  auto guard = NetnsGuard::Enter(netns);
  return guard.ok() ? UniqueFd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) : UniqueFd();
}

Status Connect(int fd, int family, uint16_t port) {
  const InetSockaddr addr = LoopbackSockaddr(family, port);
  if (::connect(fd, addr.get(), addr.len) != 0) return ErrnoStatus("connect");
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return Status::Ok();
}

// Sends `data`, half-closes, reads until EOF. A reset's errno in `err`: the
// kernel reports it once, to whichever call comes first, so a read that
// ends at 0 after the writer's send saw the reset still counts it.
std::string EchoThrough(int fd, const std::string& data, int* err) {
  int send_err = 0;
  std::thread writer([&] {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        send_err = n < 0 ? errno : 0;
        return;
      }
      off += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
  });
  std::string got;
  char buf[16384];
  *err = 0;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      *err = errno;
      break;
    }
    if (n == 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  writer.join();
  if (*err == 0 && send_err == ECONNRESET) *err = send_err;
  return got;
}

bool TableIn(const std::string& netns) {
  return RunNftablesIn(netns, std::string("list table inet ") + kPortForwardTable + "\n").ok();
}

class PortForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
    auto dir = TempDir::Create("capsule-pf");
    ASSERT_OK(dir);
    tmp_.emplace(std::move(*dir));
    dir_ = tmp_->path();
    // This program's own netns (network_test_main.cc) plays the guest.
    IpIn("/proc/" + std::to_string(::getpid()) + "/ns/net", {"link", "set", "lo", "up"});
    auto ns = TestNetns::Create(dir_ + "/pod-netns");
    ASSERT_OK(ns);
    pod_.emplace(std::move(*ns));
    IpIn(pod_->path(), {"link", "set", "lo", "up"});  // CNI's loopback plugin does this
    ASSERT_OK(WriteFile(dir_ + "/token", token_));
    agent::server::Endpoint ep{agent::server::Endpoint::Kind::kUnix, 0, dir_ + "/forward.sock"};
    auto fwd = agent::forward::PortForwarder::Start(
        ep, [t = token_]() -> Result<std::optional<std::string>> { return std::optional<std::string>(t); });
    ASSERT_OK(fwd);
    forwarder_ = std::move(*fwd);
  }
  void TearDown() override {
    listener_.reset();
    forwarder_.reset();
    pod_.reset();
    tmp_.reset();
  }
  PortForwardListener::Dial AgentDial(std::string token) {
    return [path = dir_ + "/forward.sock", token](milliseconds timeout) -> Result<UniqueFd> {
      // Many clients at once fill the fake agent's backlog: wait for room.
      ASSIGN_OR_RETURN(UniqueFd fd, ConnectUnix(path, {.listen_wait = timeout}));
      RETURN_IF_ERROR(agent_auth::Prove(fd.get(), token, timeout));
      return fd;
    };
  }
  void StartListener(PortForwardListener::Dial dial) {
    auto l = PortForwardListener::Start(pod_->path(), std::move(dial), "pod test");
    ASSERT_OK(l);
    listener_ = std::move(*l);
  }

  std::optional<TempDir> tmp_;
  std::string dir_;
  const std::string token_ = std::string(64, 'a');
  std::optional<TestNetns> pod_;
  std::unique_ptr<agent::forward::PortForwarder> forwarder_;
  std::unique_ptr<PortForwardListener> listener_;
};

TEST_F(PortForwardTest, LoopbackConnectionsInThePodNetnsReachTheGuestPortBothFamiliesManyAtOnce) {
  EchoServer guest;
  StartListener(AgentDial(token_));
  ASSERT_TRUE(listener_->ipv6());
  EXPECT_TRUE(TableIn(pod_->path()));
  EXPECT_FALSE(TableIn("/proc/" + std::to_string(::getpid()) + "/ns/net")) << "the redirect leaked out of the pod netns";

  constexpr int kClients = 32;
  std::vector<std::thread> clients;
  std::atomic<int> good{0};
  std::vector<std::string> failures(kClients);
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const int family = i % 4 == 3 ? AF_INET6 : AF_INET;
      UniqueFd fd = SocketIn(pod_->path(), family);
      if (Status st = Connect(fd.get(), family, guest.port()); !st.ok()) {
        failures[i] = st.ToString();
        return;
      }
      std::string data(64 * 1024 + i * 997, '\0');
      for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<char>((k * 31 + static_cast<size_t>(i)) & 0xff);
      int err = 0;
      const std::string got = EchoThrough(fd.get(), data, &err);
      if (got == data && err == 0) {
        ++good;
      } else {
        failures[i] = "echo of " + std::to_string(data.size()) + " bytes came back as " + std::to_string(got.size()) +
                      " bytes, errno " + std::to_string(err);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), kClients);
  for (const auto& f : failures) EXPECT_TRUE(f.empty()) << f;

  ASSERT_OK(listener_->Stop());
  EXPECT_FALSE(TableIn(pod_->path())) << "Stop left the redirect in the pod netns";
}

TEST_F(PortForwardTest, AClosedGuestPortIsAResetAndTheListenerGoesOn) {
  EchoServer guest;
  StartListener(AgentDial(token_));
  // A port nothing listens on in the "guest".
  uint16_t closed = 0;
  {
    UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(probe.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    socklen_t l = sizeof sa;
    ::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&sa), &l);
    closed = ntohs(sa.sin_port);
  }
  UniqueFd fd = SocketIn(pod_->path(), AF_INET);
  ASSERT_OK(Connect(fd.get(), AF_INET, closed));
  int err = 0;
  EXPECT_EQ(EchoThrough(fd.get(), "hello", &err), "");
  EXPECT_EQ(err, ECONNRESET) << std::strerror(err);
  // The next connection to an open port still works.
  UniqueFd again = SocketIn(pod_->path(), AF_INET);
  ASSERT_OK(Connect(again.get(), AF_INET, guest.port()));
  EXPECT_EQ(EchoThrough(again.get(), "hello", &err), "hello");
}

// Each guest port has its own budget of relays: one forwarded port that is
// full refuses more, naming the port, while another port still forwards;
// a relay that ends gives its place back.
TEST_F(PortForwardTest, EachGuestPortHasItsOwnBudgetOfRelays) {
  EchoServer a;
  EchoServer b;
  agent::server::Endpoint ep{agent::server::Endpoint::Kind::kUnix, 0, dir_ + "/budget.sock"};
  agent::forward::ForwarderOptions options;
  options.max_connections_per_port = 2;
  auto fwd = agent::forward::PortForwarder::Start(
      ep, [t = token_]() -> Result<std::optional<std::string>> { return std::optional<std::string>(t); }, options);
  ASSERT_OK(fwd);
  auto open = [&](uint16_t port, UniqueFd* out) -> Status {
    ASSIGN_OR_RETURN(UniqueFd fd, ConnectUnix(ep.path, {.listen_wait = milliseconds(5000)}));
    RETURN_IF_ERROR(agent_auth::Prove(fd.get(), token_, milliseconds(5000)));
    port_forward::Target t;
    t.address = "127.0.0.1";
    t.port = port;
    RETURN_IF_ERROR(port_forward::Request(fd.get(), t, milliseconds(5000)));
    *out = std::move(fd);
    return Status::Ok();
  };
  UniqueFd a1, a2, a3, b1;
  ASSERT_OK(open(a.port(), &a1));
  ASSERT_OK(open(a.port(), &a2));
  Status full = open(a.port(), &a3);
  EXPECT_FALSE(full.ok());
  EXPECT_NE(full.message().find("to port " + std::to_string(a.port())), std::string::npos) << full.ToString();
  EXPECT_OK(open(b.port(), &b1)) << "another port was refused";
  a1.reset();  // its relay ends and gives its place back
  Status again = Unavailable("not tried");
  for (int i = 0; i < 100 && !again.ok(); ++i) {
    again = open(a.port(), &a3);
    if (!again.ok()) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_OK(again);
}

TEST_F(PortForwardTest, AWrongTokenOrALyingAgentIsAResetNeverData) {
  EchoServer guest;
  // A host with the wrong token: the agent's gate refuses it.
  StartListener(AgentDial(std::string(64, 'b')));
  UniqueFd fd = SocketIn(pod_->path(), AF_INET);
  ASSERT_OK(Connect(fd.get(), AF_INET, guest.port()));
  int err = 0;
  EXPECT_EQ(EchoThrough(fd.get(), "hello", &err), "");
  EXPECT_EQ(err, ECONNRESET);
  ASSERT_OK(listener_->Stop());
  listener_.reset();

  // An "agent" that answers a flood instead of OK, or a reset.
  for (const std::string& answer : {std::string(100000, 'A'), std::string("OKAY\n"), std::string("ERR no\n")}) {
    StartListener([&answer](milliseconds) -> Result<UniqueFd> {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus("socketpair");
      UniqueFd ours(sv[0]);
      UniqueFd theirs(sv[1]);
      std::thread([t = std::move(theirs), answer]() mutable {
        char buf[128];
        (void)!::read(t.get(), buf, sizeof buf);
        (void)!::send(t.get(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::usleep(200 * 1000);
      }).detach();
      return ours;
    });
    UniqueFd c = SocketIn(pod_->path(), AF_INET);
    ASSERT_OK(Connect(c.get(), AF_INET, guest.port()));
    EXPECT_EQ(EchoThrough(c.get(), "hello", &err), "") << answer.substr(0, 10);
    EXPECT_EQ(err, ECONNRESET) << answer.substr(0, 10);
    ASSERT_OK(listener_->Stop());
    listener_.reset();
  }
}

TEST_F(PortForwardTest, StopResetsConnectionsInFlightAndAMissingNetnsIsNamed) {
  EchoServer guest;
  StartListener(AgentDial(token_));
  UniqueFd fd = SocketIn(pod_->path(), AF_INET);
  ASSERT_OK(Connect(fd.get(), AF_INET, guest.port()));
  ASSERT_EQ(::send(fd.get(), "x", 1, MSG_NOSIGNAL), 1);
  char c;
  ASSERT_EQ(::read(fd.get(), &c, 1), 1);  // relayed, and now idle
  ASSERT_OK(listener_->Stop());
  EXPECT_EQ(::read(fd.get(), &c, 1), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_FALSE(TableIn(pod_->path()));

  auto missing = PortForwardListener::Start(dir_ + "/no-such-netns", AgentDial(token_), "pod test");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no-such-netns"), std::string::npos) << missing.status().ToString();
}

}  // namespace
}  // namespace capsule::network
