// ConnectionGate: what stands between an accepted connection and gRPC.
// When the VM has an agent token (guest_abi::kAgentTokenFwCfgName), the
// peer must prove it first (runtime/wire/agent_auth.h); a connection that
// does not is closed before gRPC sees a byte. Each handshake runs on a
// thread of its own, bounded in time, and only a few wait at once: the
// bound is checked before anything else is done for a connection, and when
// it is reached the connection that has waited longest is closed for the
// newcomer. A local user who dials the guest's CID and stays silent can
// therefore neither exhaust the agent's threads nor keep the host out: the
// host proves its token as soon as it connects, so its handshake is over
// long before a flood of silent dials pushes it out.
//
// The token is read once (fw_cfg port I/O is slow, and a flood must not
// cause reads) and again only when a peer names another one, at most
// kTokenRereads times a second: a template clone is handed a token of its
// own after its restore, so its host's first connection names a token the
// clone's cached copy does not know yet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/common/rate_limiter.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::server {

// Reads the token a peer must prove. nullopt: the VM has none, and the
// gate admits no one (fail closed).
using TokenSource = std::function<Result<std::optional<std::string>>()>;

// `read`, with no token an error naming it: for the agent as PID 1, whose
// host always gives its VM one.
TokenSource RequireToken(TokenSource read);

inline constexpr uint32_t kTokenRereads = 4;

struct GateOptions {
  size_t max_pending = 8;                   // handshakes at once; the oldest gives way
  std::chrono::milliseconds timeout{2000};  // for the peer's AUTH line
};

class ConnectionGate {
 public:
  using Admit = std::function<void(UniqueFd)>;

  // `token` null: every connection is admitted without a handshake (an
  // agent outside a VM given no token file: its caller chose that).
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
    std::condition_variable idle;        // a handshake ended
    size_t threads = 0;                  // guarded by mu: handshakes running, evicted ones too
    std::map<uint64_t, int> waiting;     // guarded by mu: handshake id -> its fd, oldest first
    uint64_t next_id = 0;                // guarded by mu
    bool closed = false;                 // guarded by mu
    RateLimiter warnings{5, std::chrono::seconds(60)};

    std::mutex token_mu;  // one read at a time
    std::optional<std::string> cached;  // guarded by token_mu
    bool read_once = false;             // guarded by token_mu
    RateLimiter rereads{kTokenRereads, std::chrono::seconds(1)};

    // Whether `presented` is the VM's token, reading it when none was read
    // yet, or when it differs and the re-read budget allows.
    bool Accepts(std::string_view presented);
  };
  static void Handshake(const std::shared_ptr<Shared>& s, UniqueFd conn, uint64_t id);

  std::shared_ptr<Shared> shared_;
};

}  // namespace capsule::agent::server
