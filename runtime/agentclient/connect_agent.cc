// ConnectAgent: dial, wrap the stream in a gRPC client, Check; repeat on a
// fresh stream while the guest is not up yet (UNAVAILABLE, or an attempt
// that ran out of time), until the deadline or the abort fd fires. The
// pauses between attempts poll the abort fd, so a VMM that dies ends the
// wait at once. OpenAgentStream and ConnectAgentOver are the same two
// halves apart, for a stream opened ahead by another process (the pool).
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/agentclient/agent_client.h"
#include "runtime/agentclient/grpc_agent_client.h"
#include "runtime/common/elapsed.h"
#include "runtime/common/logging.h"
#include "runtime/wire/agent_auth.h"

namespace capsule::agentclient {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
const log::Logger kConnectAgentLog("agentclient");

// Rounded up: a poll given the truncated time would wake just before the
// deadline, and the caller would count that as time left.
milliseconds Left(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(deadline - Clock::now()));
}

// Waits up to `wait` for `fd` to become readable; false when fd < 0.
bool Readable(int fd, milliseconds wait) {
  if (fd < 0) {
    if (wait.count() > 0) ::poll(nullptr, 0, static_cast<int>(wait.count()));
    return false;
  }
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(wait.count()));
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

// Waits up to `wait` for either fd (each may be < 0) to become readable.
bool ReadableEither(int a, int b, milliseconds wait) {
  if (a < 0) return Readable(b, wait);
  if (b < 0) return Readable(a, wait);
  pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  int r;
  do {
    r = ::poll(p, 2, static_cast<int>(wait.count()));
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

// "Not up yet" as opposed to "will never work".
bool Retryable(const Status& st) {
  return st.code() == Code::kUnavailable || st.code() == Code::kDeadlineExceeded;
}

// A client on `fd`, checked within `budget`.
Result<AgentClientPtr> CheckedClient(UniqueFd fd, milliseconds budget, const ConnectOptions& o) {
  ClientOptions co;
  co.default_call_timeout = o.default_call_timeout;
  co.signal_call_timeout = o.signal_call_timeout;
  co.on_call_end = o.on_call_end;
  AgentClientPtr client = NewGrpcAgentClient(std::move(fd), co);
  ASSIGN_OR_RETURN(v1::CheckResponse resp, client->Check(std::max(budget, milliseconds(1))));
  if (resp.status() != v1::CheckResponse::SERVING)
    return Unavailable(fmt::format("agent Check: status {}", v1::CheckResponse::ServingStatus_Name(resp.status())));
  return client;
}

Result<AgentClientPtr> TryOnce(const Dialer& dial, milliseconds budget, const ConnectOptions& o) {
  const auto t0 = Clock::now();
  auto until = t0 + budget;
  ASSIGN_OR_RETURN(UniqueFd fd, dial(budget));
  const auto t_dialed = Clock::now();
  if (!o.token.empty()) RETURN_IF_ERROR(agent_auth::Prove(fd.get(), o.token, std::max(Left(until), milliseconds(1))));
  const auto t_proved = Clock::now();
  ASSIGN_OR_RETURN(AgentClientPtr client, CheckedClient(std::move(fd), Left(until), o));
  if (o.timings != nullptr) *o.timings = {MsBetween(t0, t_dialed), MsBetween(t_dialed, t_proved), MsSince(t_proved)};
  return client;
}

}  // namespace

Result<UniqueFd> OpenAgentStream(const Dialer& dial, const std::string& token, milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  ASSIGN_OR_RETURN(UniqueFd fd, dial(timeout));
  if (!token.empty()) RETURN_IF_ERROR(agent_auth::Prove(fd.get(), token, std::max(Left(until), milliseconds(1))));
  pollfd p{fd.get(), POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(Left(until).count()));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return ErrnoStatus("wait for the agent's first bytes");
  if (r == 0)
    return DeadlineExceeded(fmt::format("the agent sent nothing on a new stream within {} ms", timeout.count()));
  char byte;
  const ssize_t n = ::recv(fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) return Unavailable("the agent closed a new stream before its first bytes");
  return fd;
}

Result<AgentClientPtr> ConnectAgentOver(UniqueFd stream, const ConnectOptions& o) {
  const auto t0 = Clock::now();
  ASSIGN_OR_RETURN(AgentClientPtr client, CheckedClient(std::move(stream), o.attempt_timeout, o));
  if (o.timings != nullptr) *o.timings = {0, 0, MsSince(t0)};
  return client;
}

Result<AgentClientPtr> ConnectAgent(const Dialer& dial, const ConnectOptions& o) {
  auto start = Clock::now();
  auto deadline = start + o.deadline;
  Status last = DeadlineExceeded("no attempt fitted in the deadline");
  int attempts = 0;
  auto cancelled = [&] {
    return Status(Code::kCancelled, fmt::format("connect to the agent: cancelled after {} attempt(s), {} ms", attempts,
                                                std::chrono::duration_cast<milliseconds>(Clock::now() - start).count()));
  };
  for (milliseconds left = Left(deadline); left.count() > 0; left = Left(deadline)) {
    if (Readable(o.cancel_fd, milliseconds(0))) return cancelled();
    if (Readable(o.abort_fd, milliseconds(0))) break;
    ++attempts;
    auto client = TryOnce(dial, std::min(left, o.attempt_timeout), o);
    if (client.ok()) {
      kConnectAgentLog.Debug("agent answered Check after {} attempt(s), {} ms", attempts,
                             std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
      return client;
    }
    last = std::move(client).status();
    if (!Retryable(last)) return last.WithContext(fmt::format("connect to the agent (attempt {})", attempts));
    kConnectAgentLog.Trace("agent not answering yet (attempt {}): {}", attempts, last.message());
    if (ReadableEither(o.abort_fd, o.cancel_fd, std::min(o.retry_interval, Left(deadline)))) continue;
  }
  if (Readable(o.cancel_fd, milliseconds(0))) return cancelled();
  if (Readable(o.abort_fd, milliseconds(0)))
    return Status(Code::kAborted, fmt::format("connect to the agent: given up after {} attempt(s) (abort requested); "
                                              "last error: {}", attempts, last.message()));
  return DeadlineExceeded(fmt::format("the agent did not answer Check within {} ms ({} attempt(s)); last error: {}",
                                      o.deadline.count(), attempts, last.message()));
}

}  // namespace capsule::agentclient
