#include "agent/server/connection_gate.h"

#include <thread>

#include "runtime/common/agent_auth.h"
#include "runtime/common/logging.h"

namespace capsule::agent::server {
namespace {

const log::Logger kLog("server");

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

void ConnectionGate::Offer(UniqueFd conn) {
  std::optional<std::string> expected;
  if (shared_->token) {
    auto token = shared_->token();
    if (!token.ok()) {
      // Fail closed: a VM whose token cannot be read admits no one.
      if (shared_->warnings.Allow()) kLog.Error("agent token unreadable, connection refused: {}", token.status().message());
      return;
    }
    expected = std::move(*token);
  }
  std::unique_lock lock(shared_->mu);
  if (shared_->closed) return;
  if (!expected) {
    shared_->admit(std::move(conn));
    return;
  }
  if (shared_->pending >= shared_->options.max_pending) {
    if (shared_->warnings.Allow())
      kLog.Warn("{} connections already proving the agent token; one more closed", shared_->pending);
    return;
  }
  ++shared_->pending;
  lock.unlock();
  std::thread(Handshake, shared_, std::move(conn), std::move(*expected)).detach();
}

void ConnectionGate::Handshake(const std::shared_ptr<Shared>& s, UniqueFd conn, std::string expected) {
  Status st = agent_auth::Check(conn.get(), expected, s->options.timeout);
  std::lock_guard lock(s->mu);
  if (st.ok() && !s->closed) {
    s->admit(std::move(conn));
  } else if (!st.ok() && s->warnings.Allow()) {
    kLog.Warn("connection closed before gRPC: {}", st.message());
  }
  if (--s->pending == 0) s->idle.notify_all();
}

void ConnectionGate::Close() {
  std::unique_lock lock(shared_->mu);
  shared_->closed = true;
  shared_->idle.wait(lock, [&] { return shared_->pending == 0; });
}

}  // namespace capsule::agent::server
