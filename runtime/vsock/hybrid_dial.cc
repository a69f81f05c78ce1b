// Reads the reply line with MSG_PEEK first so the first bytes the guest
// sends (gRPC's settings frame, say) stay in the socket for the caller:
// only the line itself is ever consumed.
#include "runtime/vsock/hybrid_dial.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <string_view>

#include "runtime/common/file_util.h"
#include "runtime/common/unix_stream.h"
#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock {
namespace {

// "OK 4294967295\n" is 14 bytes.
constexpr size_t kMaxReplyLine = 32;

}  // namespace

std::optional<uint32_t> ParseOkLine(std::string_view reply) {
  uint64_t host_port = 0;
  bool ok = reply.substr(0, 3) == "OK " && reply.size() > 3 && reply.size() <= 13;
  for (char c : reply.substr(std::min<size_t>(3, reply.size()))) {
    ok = ok && c >= '0' && c <= '9';
    host_port = host_port * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok || host_port > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(host_port);
}

Result<HybridStream> DialHybrid(const std::string& uds_path, uint32_t port, std::chrono::milliseconds timeout) {
  std::string what = fmt::format("vsock port {} via {}", port, uds_path);
  Result<UniqueFd> conn = ConnectUnix(uds_path, {.nonblocking = true});
  if (!conn.ok()) return Unavailable(what + ": " + conn.status().message());
  return HybridHandshake(std::move(*conn), port, timeout, what);
}

Result<HybridStream> HybridHandshake(UniqueFd fd, uint32_t port, std::chrono::milliseconds timeout,
                                     const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line = fmt::format("CONNECT {}\n", port);
  if (::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
    return ErrnoStatus(what + ": send CONNECT");
  // Bytes peeked before the newline are all the reply's, so they are
  // consumed as they come: what stays queued is only what the reply has not
  // shown yet, and a back end that closes mid-line reads as end of stream
  // (peeking the same partial line again would spin until the deadline).
  std::string reply;
  char buf[kMaxReplyLine];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    Status w = WaitFd(fd.get(), POLLIN, left, "hybrid vsock handshake");
    if (!w.ok()) return std::move(w).WithContext(what);
    ssize_t n = ::recv(fd.get(), buf, kMaxReplyLine - reply.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0)
      return Unavailable(what + (reply.empty() ? ": closed before OK (nothing listens on that guest port, or the guest is not up)"
                                               : ": closed in the middle of the reply line"));
    const char* nl = static_cast<const char*>(std::memchr(buf, '\n', static_cast<size_t>(n)));
    const size_t take = nl == nullptr ? static_cast<size_t>(n) : static_cast<size_t>(nl - buf) + 1;
    if (::recv(fd.get(), buf, take, MSG_DONTWAIT) != static_cast<ssize_t>(take))
      return ErrnoStatus(what + ": read the reply line");
    reply.append(buf, take);
    if (nl == nullptr) {
      if (reply.size() == kMaxReplyLine) return Internal(what + ": reply line too long");
      continue;  // the rest of the line is on its way
    }
    reply.pop_back();  // the newline
    std::optional<uint32_t> host_port = ParseOkLine(reply);
    if (!host_port) return Internal(what + ": unexpected reply '" + reply + "'");
    RETURN_IF_ERROR(SetNonBlocking(fd.get(), false));
    return HybridStream{std::move(fd), *host_port};
  }
}

}  // namespace capsule::vsock
