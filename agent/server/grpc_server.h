// The agent's gRPC server. gRPC cannot listen on AF_VSOCK itself, so the
// server has no ports of its own: one thread per endpoint accepts
// connections and hands each connected fd to gRPC
// (grpc::AddInsecureChannelFromFd), which then owns and serves it, once
// the connection passed the ConnectionGate (the VM's agent token).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "agent/server/connection_gate.h"
#include "agent/server/endpoint.h"
#include "agent/server/limits.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::server {

using InterceptorFactories = std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>;

class AgentServer {
  struct Token {};  // only Start can make one, so only Start constructs

 public:
  // Listens on every endpoint (all or none) and starts serving `service`
  // (not owned; must outlive the server) with the thread budget `limits`.
  // `interceptors` see every call first (the test build's fault switch,
  // agent/faults; the production agent passes none). With a `token`
  // source, every connection proves the token first (connection_gate.h).
  static Result<std::unique_ptr<AgentServer>> Start(grpc::Service* service, const std::vector<Endpoint>& endpoints,
                                                    const ServerLimits& limits = {},
                                                    InterceptorFactories interceptors = {},
                                                    TokenSource token = nullptr);

  explicit AgentServer(Token) {}
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;
  ~AgentServer();

  // Stops accepting, lets calls in flight finish until `grace` has passed,
  // then cancels the rest and closes every connection. Idempotent.
  void Shutdown(std::chrono::milliseconds grace);

 private:
  struct Listener {
    Endpoint endpoint;
    UniqueFd fd;
  };
  void AcceptLoop(Listener* listener);

  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ConnectionGate> gate_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<std::thread> threads_;
  UniqueFd stop_;  // eventfd: readable once Shutdown begins
  bool shut_down_ = false;
};

}  // namespace capsule::agent::server
