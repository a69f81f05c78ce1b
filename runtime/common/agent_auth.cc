#include "runtime/common/agent_auth.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>

#include <fmt/format.h>

#include "runtime/common/guest_abi.h"

namespace capsule::agent_auth {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kAuthVerb = "AUTH ";
constexpr std::string_view kOk = "OK\n";
constexpr std::string_view kDenied = "DENIED\n";
constexpr size_t kAuthLineLength = kAuthVerb.size() + guest_abi::kAgentTokenHexLength + 1;

int LeftMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

Status WaitFor(int fd, short events, Clock::time_point deadline, std::string_view what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, LeftMs(deadline));
    if (r > 0) return Status::Ok();
    if (r == 0) return DeadlineExceeded(fmt::format("agent handshake: no {} in time", what));
    if (errno != EINTR) return ErrnoStatus("agent handshake: poll");
  }
}

Status WriteAllBy(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "room to write"));
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      return Unavailable("agent handshake: the peer closed the stream");
    return ErrnoStatus("agent handshake: send");
  }
  return Status::Ok();
}

// One byte at a time up to and including '\n', at most `max` bytes: what
// follows the line stays in the socket for gRPC.
Result<std::string> ReadLine(int fd, size_t max, Clock::time_point deadline) {
  std::string line;
  while (line.size() < max) {
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 1) {
      line += c;
      if (c == '\n') return line;
      continue;
    }
    if (n == 0) return Unavailable("agent handshake: the peer closed the stream");
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      if (errno == ECONNRESET) return Unavailable("agent handshake: the peer reset the stream");
      return ErrnoStatus("agent handshake: recv");
    }
    RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "line"));
  }
  return line;  // no newline within `max`: the caller refuses it
}

bool EqualInConstantTime(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Result<std::string> NewToken() {
  unsigned char bytes[guest_abi::kAgentTokenHexLength / 2];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("getrandom for an agent token");
    got += static_cast<size_t>(n);
  }
  std::string hex;
  hex.reserve(guest_abi::kAgentTokenHexLength);
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

bool IsWellFormedToken(std::string_view token) {
  if (token.size() != guest_abi::kAgentTokenHexLength) return false;
  for (char c : token)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Status Prove(int fd, const std::string& token, milliseconds timeout) {
  if (!IsWellFormedToken(token)) return InvalidArgument("agent handshake: the VM's token is not 64 hex digits");
  const auto deadline = Clock::now() + timeout;
  RETURN_IF_ERROR(WriteAllBy(fd, std::string(kAuthVerb) + token + "\n", deadline));
  ASSIGN_OR_RETURN(std::string reply, ReadLine(fd, kDenied.size(), deadline));
  if (reply == kOk) return Status::Ok();
  if (reply == kDenied) return PermissionDenied("the agent refused this VM's token (AUTH denied)");
  return Unavailable(fmt::format("agent handshake: unexpected reply ({} bytes) instead of OK", reply.size()));
}

Status Check(int fd, const std::string& expected, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  ASSIGN_OR_RETURN(std::string line, ReadLine(fd, kAuthLineLength, deadline));
  const bool shaped = line.size() == kAuthLineLength && line.back() == '\n' &&
                      std::string_view(line).substr(0, kAuthVerb.size()) == kAuthVerb;
  const std::string_view token = shaped ? std::string_view(line).substr(kAuthVerb.size(), kAuthLineLength - kAuthVerb.size() - 1)
                                        : std::string_view();
  if (shaped && IsWellFormedToken(expected) && EqualInConstantTime(token, expected))
    return WriteAllBy(fd, kOk, deadline);
  (void)WriteAllBy(fd, kDenied, deadline);
  return PermissionDenied(shaped ? "agent handshake: a wrong token" : "agent handshake: not an AUTH line");
}

}  // namespace capsule::agent_auth
