// PortForwarder: the agent's end of `kubectl port-forward`. It listens on
// its own endpoint (vsock:guest_abi::kPortForwardVsockPort in a VM), lets
// each connection prove the agent token (ConnectionGate, as the gRPC port
// does), reads one FORWARD line (port_forward_wire.h), connects to that
// port on the guest's loopback, where the pod's containers live, answers
// OK or ERR, and relays bytes until either side is done. One thread per
// connection, at most Options::max_connections at once and
// max_connections_per_port to one guest port; more are refused with ERR.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "agent/server/connection_gate.h"
#include "agent/server/endpoint.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::forward {

struct ForwarderOptions {
  size_t max_connections = 256;
  // Per guest port, so one forwarded port cannot take every connection.
  size_t max_connections_per_port = 64;
  size_t max_pending_handshakes = 64;  // agent token handshakes at once; the oldest gives way
  std::chrono::milliseconds request_timeout{2000};  // for the FORWARD line
  std::chrono::milliseconds connect_timeout{5000};  // to the guest port
};

class PortForwarder {
  struct Token {};

 public:
  static Result<std::unique_ptr<PortForwarder>> Start(const server::Endpoint& endpoint, server::TokenSource token,
                                                      ForwarderOptions options = {});
  explicit PortForwarder(Token) {}
  ~PortForwarder();
  PortForwarder(const PortForwarder&) = delete;
  PortForwarder& operator=(const PortForwarder&) = delete;

  // Stops accepting and ends every relay (their streams are reset). Idempotent.
  void Shutdown();

 private:
  void AcceptLoop();
  void Admit(UniqueFd conn);
  void Serve(UniqueFd conn);

  // One relay's place in its guest port's budget, given back when it goes.
  class PortSlot {
   public:
    PortSlot(PortForwarder* owner, uint16_t port) : owner_(owner), port_(port) {}
    PortSlot(PortSlot&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), port_(o.port_) {}
    PortSlot& operator=(PortSlot&&) = delete;
    ~PortSlot();

   private:
    PortForwarder* owner_;
    uint16_t port_;
  };
  std::optional<PortSlot> TakePortSlot(uint16_t port);

  server::Endpoint endpoint_;
  ForwarderOptions options_;
  UniqueFd listen_;
  UniqueFd stop_;  // eventfd: readable once Shutdown begins; every relay polls it
  std::unique_ptr<server::ConnectionGate> gate_;
  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable idle_;
  size_t active_ = 0;  // guarded by mu_
  std::map<uint16_t, size_t> per_port_;  // guarded by mu_: relays by guest port
  bool shut_down_ = false;
};

}  // namespace capsule::agent::forward
