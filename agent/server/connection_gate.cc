#include "agent/server/connection_gate.h"

#include <sys/socket.h>

#include <thread>

#include "runtime/common/logging.h"
#include "runtime/wire/agent_auth.h"

namespace capsule::agent::server {
namespace {

const log::Logger kConnectionGateLog("server");
// How long a new connection waits for evicted handshakes to end.
constexpr std::chrono::milliseconds kEvictedWait{500};

}  // namespace

TokenSource RequireToken(TokenSource read) {
  return [read = std::move(read)]() -> Result<std::optional<std::string>> {
    ASSIGN_OR_RETURN(std::optional<std::string> token, read());
    if (!token) return PermissionDenied("this VM was given no agent token: no connection is admitted");
    return token;
  };
}

ConnectionGate::ConnectionGate(TokenSource token, Admit admit, GateOptions options)
    : shared_(std::make_shared<Shared>()) {
  shared_->token = std::move(token);
  shared_->admit = std::move(admit);
  shared_->options = options;
}

ConnectionGate::~ConnectionGate() { Close(); }

bool ConnectionGate::Shared::Accepts(std::string_view presented) {
  std::lock_guard lock(token_mu);
  if (cached && agent_auth::SameToken(presented, *cached)) return true;
  if (read_once && !rereads.Allow()) return false;
  read_once = true;
  auto t = token();
  if (!t.ok() || !*t) {
    // Fail closed: a VM whose token cannot be read admits no one.
    cached.reset();
    if (warnings.Allow())
      kConnectionGateLog.Error("agent token unreadable, connection refused: {}",
                               t.ok() ? "this VM was given none" : t.status().message());
    return false;
  }
  cached = std::move(**t);
  return agent_auth::SameToken(presented, *cached);
}

void ConnectionGate::Offer(UniqueFd conn) {
  std::unique_lock lock(shared_->mu);
  if (shared_->closed) return;
  if (!shared_->token) {
    shared_->admit(std::move(conn));
    return;
  }
  const GateOptions& o = shared_->options;
  if (shared_->waiting.size() >= o.max_pending) {
    // The one that waited longest gives way: its thread sees end of file
    // at once and ends.
    auto oldest = shared_->waiting.begin();
    ::shutdown(oldest->second, SHUT_RDWR);
    shared_->waiting.erase(oldest);
    if (shared_->warnings.Allow())
      kConnectionGateLog.Warn("{} connections already waiting to prove the agent token; the oldest closed",
                              o.max_pending);
  }
  // Evicted handshakes end at once; the accept loop waits for them rather
  // than let threads pile up or turn the newcomer away.
  if (!shared_->idle.wait_for(lock, kEvictedWait, [&] { return shared_->closed || shared_->threads < 2 * o.max_pending; })) {
    if (shared_->warnings.Allow())
      kConnectionGateLog.Warn("{} agent token handshakes still ending; a connection closed", shared_->threads);
    return;
  }
  if (shared_->closed) return;
  const uint64_t id = shared_->next_id++;
  shared_->waiting.emplace(id, conn.get());
  ++shared_->threads;
  lock.unlock();
  std::thread(Handshake, shared_, std::move(conn), id).detach();
}

void ConnectionGate::Handshake(const std::shared_ptr<Shared>& s, UniqueFd conn, uint64_t id) {
  Status st = agent_auth::Check(
      conn.get(), [&](std::string_view presented) { return s->Accepts(presented); }, s->options.timeout);
  std::lock_guard lock(s->mu);
  // Out of `waiting` before the fd can be handed on or closed, so an
  // eviction never shuts down a stream that is no longer this one.
  s->waiting.erase(id);
  if (st.ok() && !s->closed) {
    s->admit(std::move(conn));
  } else if (!st.ok() && s->warnings.Allow()) {
    kConnectionGateLog.Warn("connection closed before gRPC: {}", st.message());
  }
  --s->threads;
  s->idle.notify_all();
}

void ConnectionGate::Close() {
  std::unique_lock lock(shared_->mu);
  shared_->closed = true;
  shared_->idle.wait(lock, [&] { return shared_->threads == 0; });
}

}  // namespace capsule::agent::server
