#include "runtime/network/port_forward_listener.h"

#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "runtime/common/byte_relay.h"
#include "runtime/common/inet_sockaddr.h"
#include "runtime/common/logging.h"
#include "runtime/network/netns.h"
#include "runtime/wire/port_forward_wire.h"

namespace capsule::network {
namespace {

const log::Logger kPortForwardListenerLog("portforward");

// <linux/netfilter_ipv6/ip6_tables.h>'s IP6T_SO_ORIGINAL_DST; that header
// does not mix with the libc ones.
constexpr int kIp6OriginalDst = 80;

Result<UniqueFd> ListenLoopback(int family, uint16_t port) {
  UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return ErrnoStatus("socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  const InetSockaddr addr = LoopbackSockaddr(family, port);
  if (::bind(fd.get(), addr.get(), addr.len) != 0)
    return ErrnoStatus(family == AF_INET ? "bind 127.0.0.1" : "bind [::1]");
  if (::listen(fd.get(), 128) != 0) return ErrnoStatus("listen");
  return fd;
}

uint16_t LocalPort(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return ntohs(sa.sin_port);
}

// Where the connection was headed before the redirect.
Result<port_forward::Target> OriginalDestination(int fd, int family) {
  port_forward::Target t;
  t.family = family;
  char buf[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET) {
    sockaddr_in sa{};
    socklen_t len = sizeof sa;
    if (::getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &sa, &len) != 0) return ErrnoStatus("getsockopt(SO_ORIGINAL_DST)");
    ::inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
    t.port = ntohs(sa.sin_port);
  } else {
    sockaddr_in6 sa{};
    socklen_t len = sizeof sa;
    if (::getsockopt(fd, SOL_IPV6, kIp6OriginalDst, &sa, &len) != 0)
      return ErrnoStatus("getsockopt(IP6T_SO_ORIGINAL_DST)");
    ::inet_ntop(AF_INET6, &sa.sin6_addr, buf, sizeof buf);
    t.port = ntohs(sa.sin6_port);
  }
  t.address = buf;
  return t;
}

}  // namespace

Result<std::unique_ptr<PortForwardListener>> PortForwardListener::Start(const std::string& netns_path, Dial dial,
                                                                        std::string label,
                                                                        PortForwardOptions options) {
  auto l = std::make_unique<PortForwardListener>(Token{});
  l->label_ = std::move(label);
  l->dial_ = std::move(dial);
  l->options_ = options;
  l->stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!l->stop_) return ErrnoStatus("eventfd for the port-forward listener");
  // The sockets are made inside the pod's netns and stay there.
  Status made = [&]() -> Status {
    ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(netns_path));
    ASSIGN_OR_RETURN(l->listen4_, ListenLoopback(AF_INET, 0));
    l->port_ = LocalPort(l->listen4_.get());
    auto v6 = ListenLoopback(AF_INET6, l->port_);
    if (v6.ok()) {
      l->listen6_ = std::move(v6).value();
    } else {
      kPortForwardListenerLog.Info("{}: port-forward over IPv4 only: {}", l->label_, v6.status().message());
    }
    return Status::Ok();
  }();
  RETURN_IF_ERROR_CTX(made, "port-forward listener in netns " + netns_path);
  ASSIGN_OR_RETURN(l->redirect_, LoopbackRedirect::Install(netns_path, l->port_, l->ipv6()));
  PortForwardListener* raw = l.get();
  l->accept_thread_ = std::thread([raw] { raw->AcceptLoop(); });
  kPortForwardListenerLog.Info("{}: port-forward: loopback TCP of netns {} goes to port {} and on into the VM",
                               l->label_, netns_path, l->port_);
  return l;
}

PortForwardListener::~PortForwardListener() {
  if (Status st = Stop(); !st.ok()) kPortForwardListenerLog.Warn("{}: {}", label_, st.ToString());
}

void PortForwardListener::AcceptLoop() {
  for (;;) {
    pollfd fds[3] = {{stop_.get(), POLLIN, 0}, {listen4_.get(), POLLIN, 0}, {listen6_ ? listen6_.get() : -1, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      kPortForwardListenerLog.Error("{}: port-forward listener: {}", label_, ErrnoStatus("poll").message());
      return;
    }
    if (fds[0].revents != 0) return;
    for (int i = 1; i < 3; ++i) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      UniqueFd conn(::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!conn) continue;
      std::unique_lock lock(mu_);
      if (active_ >= options_.max_connections) {
        lock.unlock();
        kPortForwardListenerLog.Warn("{}: port-forward: {} connections already forwarded; one more reset", label_,
                                     active_);
        ResetOnClose(conn.get());
        continue;
      }
      ++active_;
      lock.unlock();
      const int family = i == 1 ? AF_INET : AF_INET6;
      std::thread([this, c = std::move(conn), family]() mutable {
        Forward(std::move(c), family);
        std::lock_guard done(mu_);
        if (--active_ == 0) idle_.notify_all();
      }).detach();
    }
  }
}

void PortForwardListener::Forward(UniqueFd conn, int family) {
  auto target = OriginalDestination(conn.get(), family);
  if (!target.ok()) {
    kPortForwardListenerLog.Warn("{}: port-forward: {}", label_, target.status().message());
    ResetOnClose(conn.get());
    return;
  }
  auto guest = dial_(options_.guest_timeout);
  Status asked = guest.ok() ? port_forward::Request(guest->get(), *target, options_.guest_timeout) : guest.status();
  if (!asked.ok()) {
    kPortForwardListenerLog.Info("{}: port-forward to {} in the guest refused: {}", label_, target->ToString(),
                                 asked.message());
    ResetOnClose(conn.get());
    return;
  }
  RelayStats stats;
  Status relayed = Relay(conn.get(), guest->get(), stop_.get(), "port-forward to " + target->ToString(), &stats);
  kPortForwardListenerLog.Debug("{}: port-forward to {} ended ({} bytes in, {} out): {}", label_, target->ToString(),
                                stats.a_to_b, stats.b_to_a, relayed.ok() ? "done" : relayed.message());
}

Status PortForwardListener::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return Status::Ok();
    stopped_ = true;
  }
  if (stop_) {
    uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  {
    // Relays end at once on the stop fd; a connection still dialling the
    // guest ends within guest_timeout (the VM's stop ends it sooner).
    std::unique_lock lock(mu_);
    idle_.wait(lock, [this] { return active_ == 0; });
  }
  listen4_.reset();
  listen6_.reset();
  return redirect_ ? redirect_->Remove() : Status::Ok();
}

}  // namespace capsule::network
