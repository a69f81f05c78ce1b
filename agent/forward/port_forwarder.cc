#include "agent/forward/port_forwarder.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "runtime/common/byte_relay.h"
#include "runtime/common/inet_sockaddr.h"
#include "runtime/common/line_io.h"
#include "runtime/common/logging.h"
#include "runtime/wire/port_forward_wire.h"

namespace capsule::agent::forward {
namespace {

const log::Logger kPortForwarderLog("forward");
using Clock = std::chrono::steady_clock;

Result<UniqueFd> ConnectLoopback(const port_forward::Target& t, std::chrono::milliseconds timeout) {
  const std::string where = t.ToString();
  UniqueFd fd(::socket(t.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return ErrnoStatus("socket for " + where);
  ASSIGN_OR_RETURN(InetSockaddr addr, MakeInetSockaddr(t.family, t.address, t.port));
  if (::connect(fd.get(), addr.get(), addr.len) != 0 && errno != EINPROGRESS)
    return Unavailable(fmt::format("connect {}: {}", where, std::strerror(errno)));
  RETURN_IF_ERROR(line_io::WaitFor(fd.get(), POLLOUT, Clock::now() + timeout, "connect " + where, "answer"));
  int err = 0;
  socklen_t elen = sizeof err;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen);
  if (err != 0) return Unavailable(fmt::format("connect {}: {}", where, std::strerror(err)));
  return fd;
}

}  // namespace

Result<std::unique_ptr<PortForwarder>> PortForwarder::Start(const server::Endpoint& endpoint,
                                                            server::TokenSource token, ForwarderOptions options) {
  auto f = std::make_unique<PortForwarder>(Token{});
  f->endpoint_ = endpoint;
  f->options_ = options;
  f->stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!f->stop_) return ErrnoStatus("eventfd for the port forwarder's stop signal");
  auto fd = server::Listen(endpoint);
  if (!fd.ok()) return std::move(fd).status().WithContext("port forwarder: listen on " + endpoint.ToString());
  f->listen_ = std::move(fd).value();
  PortForwarder* raw = f.get();
  // A burst of forwarded connections (a browser opens several at once) is
  // normal here, so more handshakes may wait than on the gRPC port; each is
  // still bounded in time.
  server::GateOptions gate;
  gate.max_pending = options.max_pending_handshakes;
  f->gate_ = std::make_unique<server::ConnectionGate>(std::move(token), [raw](UniqueFd conn) { raw->Admit(std::move(conn)); },
                                                      gate);
  f->accept_thread_ = std::thread([raw] { raw->AcceptLoop(); });
  return f;
}

PortForwarder::~PortForwarder() { Shutdown(); }

void PortForwarder::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      kPortForwarderLog.Error("poll on {}: {}", endpoint_.ToString(), ErrnoStatus("poll").message());
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    UniqueFd conn(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn) continue;  // the peer gave up already
    gate_->Offer(std::move(conn));
  }
}

// Called by the gate (under its lock): hands the stream to a thread of its own.
void PortForwarder::Admit(UniqueFd conn) {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    if (active_ >= options_.max_connections) {
      (void)line_io::WriteAll(conn.get(),
                              port_forward::FormatReply(ResourceExhausted(fmt::format(
                                  "{} forwarded connections already open", options_.max_connections))),
                              Clock::now() + std::chrono::milliseconds(100), "port-forward reply");
      return;
    }
    ++active_;
  }
  std::thread([this, c = std::move(conn)]() mutable {
    Serve(std::move(c));
    std::lock_guard lock(mu_);
    if (--active_ == 0) idle_.notify_all();
  }).detach();
}

void PortForwarder::Serve(UniqueFd conn) {
  constexpr std::string_view kWhat = "port-forward request";
  auto line = line_io::ReadLine(conn.get(), port_forward::kMaxRequestLine + 1,
                                Clock::now() + options_.request_timeout, kWhat);
  if (!line.ok()) {
    kPortForwarderLog.Warn("{}", line.status().message());
    return;
  }
  Result<port_forward::Target> target = InvalidArgument("port-forward request: longer than a request line");
  if (!line->empty() && line->back() == '\n') target = port_forward::ParseRequest(std::string_view(*line).substr(0, line->size() - 1));
  const std::optional<PortSlot> slot = target.ok() ? TakePortSlot(target->port) : std::nullopt;
  if (target.ok()) {
    if (!slot) {
      target = ResourceExhausted(fmt::format("{} forwarded connections to port {} already open",
                                             options_.max_connections_per_port, target->port));
    }
  }
  Result<UniqueFd> upstream = target.ok() ? ConnectLoopback(*target, options_.connect_timeout) : target.status();
  const auto reply_by = Clock::now() + options_.request_timeout;
  if (!upstream.ok()) {
    kPortForwarderLog.Info("port-forward refused: {}", upstream.status().message());
    (void)line_io::WriteAll(conn.get(), port_forward::FormatReply(upstream.status()), reply_by, "port-forward reply");
    return;
  }
  if (Status sent = line_io::WriteAll(conn.get(), port_forward::FormatReply(Status::Ok()), reply_by, "port-forward reply");
      !sent.ok()) {
    kPortForwarderLog.Warn("{}", sent.message());
    return;
  }
  RelayStats stats;
  Status relayed = Relay(conn.get(), upstream->get(), stop_.get(), "port-forward to " + target->ToString(), &stats);
  kPortForwarderLog.Debug("port-forward to {} ended ({} bytes in, {} out): {}", target->ToString(), stats.a_to_b,
                          stats.b_to_a, relayed.ok() ? "done" : relayed.message());
}

std::optional<PortForwarder::PortSlot> PortForwarder::TakePortSlot(uint16_t port) {
  std::lock_guard lock(mu_);
  size_t& n = per_port_[port];
  if (n >= options_.max_connections_per_port) return std::nullopt;
  ++n;
  return PortSlot(this, port);
}

PortForwarder::PortSlot::~PortSlot() {
  if (!owner_) return;
  std::lock_guard lock(owner_->mu_);
  if (--owner_->per_port_[port_] == 0) owner_->per_port_.erase(port_);
}

void PortForwarder::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  if (accept_thread_.joinable()) accept_thread_.join();
  if (gate_) gate_->Close();
  std::unique_lock lock(mu_);
  // Relays end at once on the stop fd; a connection still in its request or
  // its connect ends within those timeouts.
  idle_.wait(lock, [this] { return active_ == 0; });
  listen_.reset();
  if (endpoint_.kind == server::Endpoint::Kind::kUnix) ::unlink(endpoint_.path.c_str());
}

}  // namespace capsule::agent::forward
