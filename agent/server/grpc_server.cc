// Accept loops poll the listening socket and a stop eventfd, so Shutdown
// never races a blocked accept(2).
#include "agent/server/grpc_server.h"

#include <fcntl.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/common/logging.h"

namespace capsule::agent::server {
namespace {

const log::Logger kGrpcServerLog("server");

}  // namespace

Result<std::unique_ptr<AgentServer>> AgentServer::Start(grpc::Service* service,
                                                        const std::vector<Endpoint>& endpoints,
                                                        const ServerLimits& limits,
                                                        InterceptorFactories interceptors, TokenSource token) {
  auto s = std::make_unique<AgentServer>(Token{});
  s->stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->stop_) return ErrnoStatus("eventfd for the server's stop signal");
  for (const auto& ep : endpoints) {
    auto fd = Listen(ep);
    if (!fd.ok()) return std::move(fd).status().WithContext("listen on " + ep.ToString());
    s->listeners_.push_back(std::make_unique<Listener>(Listener{ep, std::move(fd).value()}));
  }
  grpc::ServerBuilder builder;
  builder.RegisterService(service);
  // The link is one local vsock stream: no bandwidth-delay product to
  // probe, and each BDP ping costs the guest a write and the host an answer.
  // A fixed window as large as any message we take (WriteStdin chunks)
  // replaces the probing.
  // A 3 MB CRI ExecSync output came back in 1.3 s (p50) against 1.6-1.9 s
  // with BDP probing (shim_guest_exec_bench with that command, two runs).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  // limits.h: blocking calls are admitted below this, so the rest always
  // find a thread; the default quota would be unbounded.
  grpc::ResourceQuota quota("capsule-agent");
  quota.SetMaxThreads(limits.MaxThreads());
  builder.SetResourceQuota(quota);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, kMinPollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxPollers);
  if (!interceptors.empty()) builder.experimental().SetInterceptorCreators(std::move(interceptors));
  s->server_ = builder.BuildAndStart();
  if (!s->server_) return Internal("gRPC server failed to start");
  grpc::Server* server = s->server_.get();
  // gRPC owns the fd from here and closes it when the connection ends.
  s->gate_ = std::make_unique<ConnectionGate>(std::move(token),
                                              [server](UniqueFd conn) { grpc::AddInsecureChannelFromFd(server, conn.release()); });
  for (auto& l : s->listeners_) {
    Listener* raw = l.get();
    s->threads_.emplace_back([srv = s.get(), raw] { srv->AcceptLoop(raw); });
  }
  return s;
}

AgentServer::~AgentServer() { Shutdown(std::chrono::milliseconds(0)); }

void AgentServer::AcceptLoop(Listener* listener) {
  const std::string name = listener->endpoint.ToString();
  for (;;) {
    pollfd fds[2] = {{listener->fd.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      kGrpcServerLog.Error("poll on {}: {}", name, ErrnoStatus("poll").message());
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    UniqueFd conn(::accept4(listener->fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn) {
      // ECONNABORTED and friends: the peer gave up; keep serving the rest.
      if (errno != EINTR && errno != EAGAIN)
        kGrpcServerLog.Warn("accept on {}: {}", name, ErrnoStatus("accept4").message());
      continue;
    }
    kGrpcServerLog.Debug("connection on {} (fd {})", name, conn.get());
    gate_->Offer(std::move(conn));
  }
}

void AgentServer::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  for (auto& t : threads_) t.join();
  threads_.clear();
  if (gate_) gate_->Close();  // no connection reaches gRPC after this
  for (auto& l : listeners_) {
    l->fd.reset();
    if (l->endpoint.kind == Endpoint::Kind::kUnix) ::unlink(l->endpoint.path.c_str());
  }
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + grace);
}

}  // namespace capsule::agent::server
