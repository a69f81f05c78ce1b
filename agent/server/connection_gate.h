// ConnectionGate: what stands between an accepted connection and gRPC.
// When the VM has an agent token (guest_abi::kAgentTokenFwCfgName), the
// peer must prove it first (runtime/common/agent_auth.h); a connection that
// does not is closed before gRPC sees a byte. Each handshake runs on a
// thread of its own, bounded in time, and only a few run at once (more are
// closed at once), so a local user who dials the guest's CID and stays
// silent cannot exhaust the agent's threads; a flood of such dials can
// delay the host's next connection by the handshake timeout, which its
// connect loop retries through.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/common/rate_limiter.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::server {

// The token a peer must prove, asked again for every connection (a template
// clone gets its own token after restore); nullopt: no token, no handshake.
using TokenSource = std::function<Result<std::optional<std::string>>()>;

// `read`, with no token an error: for the agent as PID 1, whose host always
// gives its VM one. A VM without a token (a host bug, a template clone that
// lost it) then admits no one, rather than everyone who can reach its vsock
// port (any local user, with the kernel's vhost-vsock).
TokenSource RequireToken(TokenSource read);

struct GateOptions {
  size_t max_pending = 8;                   // handshakes at once; more are closed
  std::chrono::milliseconds timeout{2000};  // for the peer's AUTH line
};

class ConnectionGate {
 public:
  using Admit = std::function<void(UniqueFd)>;

  // `admit` hands a connection to gRPC; it is never called after Close().
  ConnectionGate(TokenSource token, Admit admit, GateOptions options = {});
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // A connection accept(2) just returned.
  void Offer(UniqueFd conn);
  // Admits nothing more and waits for the handshakes in flight (each ends
  // within the timeout). Idempotent.
  void Close();

 private:
  struct Shared {
    TokenSource token;
    Admit admit;
    GateOptions options;
    std::mutex mu;
    std::condition_variable idle;
    size_t pending = 0;  // guarded by mu
    bool closed = false; // guarded by mu
    RateLimiter warnings{5, std::chrono::seconds(60)};
  };
  static void Handshake(const std::shared_ptr<Shared>& s, UniqueFd conn, std::string expected);

  std::shared_ptr<Shared> shared_;
};

}  // namespace capsule::agent::server
