// AF_UNIX plumbing with errors that name the socket path.
#include "runtime/vsock/unix_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>


#include "runtime/common/unix_stream.h"

namespace capsule::vsock {
Result<UniqueFd> ListenUnix(const std::string& path, int backlog) {
  UnixListenOptions o;
  o.backlog = backlog;
  o.existing = UnixListenOptions::Existing::kReplaceStale;
  o.nonblocking = true;
  return capsule::ListenUnix(path, o);
}

ssize_t WritevNoSignal(int fd, const iovec* iov, size_t count) {
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = count;
  for (;;) {
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -errno;
  }
}

Status WaitFd(int fd, short events, std::chrono::milliseconds timeout, const char* what) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) left = std::chrono::milliseconds(0);
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc > 0) return Status::Ok();
    if (rc == 0) return DeadlineExceeded(std::string(what) + ": timed out after " + std::to_string(timeout.count()) + " ms");
    if (errno != EINTR) return ErrnoStatus(std::string("poll ") + what);
  }
}

}  // namespace capsule::vsock
