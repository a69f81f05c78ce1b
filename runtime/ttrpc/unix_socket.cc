// Socket set-up behind ListenUnix/DialUnix: sockaddr_un building with a
// length check, a non-blocking connect loop bounded by the caller's timeout.
#include "runtime/ttrpc/unix_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "runtime/common/file_util.h"
#include "runtime/common/unix_listen.h"

namespace capsule::ttrpc {
namespace {

using Clock = std::chrono::steady_clock;

// Back-off between connect attempts while a server starts: from 1 ms,
// doubling, at most 50 ms (containerd's dialer retries on a similar scale).
constexpr std::chrono::milliseconds kDialRetryMin{1};
constexpr std::chrono::milliseconds kDialRetryMax{50};

Result<sockaddr_un> MakeAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty()) return InvalidArgument("unix socket path is empty");
  if (path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument("unix socket path " + path + " is longer than " +
                           std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

bool RetryableConnectError(int err) {
  return err == ENOENT || err == ECONNREFUSED || err == EAGAIN;
}

}  // namespace

std::string StripUnixScheme(std::string_view address) {
  constexpr std::string_view kScheme = "unix://";
  if (address.substr(0, kScheme.size()) == kScheme) address.remove_prefix(kScheme.size());
  return std::string(address);
}

Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode) {
  UnixListenOptions o;
  o.mode = mode;
  return capsule::ListenUnix(path, o);
}

Result<UniqueFd> DialUnix(const std::string& path, std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(sockaddr_un addr, MakeAddress(path));
  const auto deadline = Clock::now() + timeout;
  auto backoff = kDialRetryMin;
  while (true) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return ErrnoStatus("socket(AF_UNIX) for " + path);
    int rc;
    do {
      rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) {
      RETURN_IF_ERROR_CTX(SetNonBlocking(fd.get(), false), "connection to " + path);
      return fd;
    }
    const int err = errno;
    const auto now = Clock::now();
    if (!RetryableConnectError(err)) return ErrnoStatus("connect " + path, err);
    if (now >= deadline) {
      Status st = ErrnoStatus("connect " + path, err);
      return Status(timeout.count() > 0 ? Code::kDeadlineExceeded : Code::kUnavailable,
                    st.message() + (timeout.count() > 0
                                        ? " (gave up after " + std::to_string(timeout.count()) + " ms)"
                                        : ""));
    }
    auto wait = std::min<Clock::duration>(backoff, deadline - now);
    ::poll(nullptr, 0, static_cast<int>(
                           std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
    backoff = std::min(backoff * 2, kDialRetryMax);
  }
}

Result<uid_t> PeerUid(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return ErrnoStatus("getsockopt(SO_PEERCRED)");
  }
  return cred.uid;
}

bool IsListeningSocket(int fd) {
  int val = 0;
  socklen_t len = sizeof val;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &val, &len) == 0 && val != 0;
}

}  // namespace capsule::ttrpc
