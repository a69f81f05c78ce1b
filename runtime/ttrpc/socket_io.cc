// send(2)/read(2) loops. Deadline-bounded writes use MSG_DONTWAIT per call
// so the descriptor itself stays blocking for the reader thread.
#include "runtime/ttrpc/socket_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace capsule::ttrpc {

Status SendAll(int fd, std::string_view data) {
  size_t sent = 0;
  return SendAllBefore(fd, data, std::nullopt, &sent);
}

Status SendAllBefore(int fd, std::string_view data,
                     std::optional<std::chrono::steady_clock::time_point> deadline, size_t* sent) {
  *sent = 0;
  const int flags = MSG_NOSIGNAL | (deadline ? MSG_DONTWAIT : 0);
  while (*sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + *sent, data.size() - *sent, flags);
    if (n > 0) {
      *sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline -
                                                                std::chrono::steady_clock::now());
      if (left.count() <= 0) return DeadlineExceeded("send: peer not reading before the deadline");
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR)
        return ErrnoStatus("poll(POLLOUT)");
      continue;
    }
    return ErrnoStatus("send");
  }
  return Status::Ok();
}

Result<size_t> ReadSome(int fd, char* buf, size_t len) {
  while (true) {
    ssize_t n = ::read(fd, buf, len);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) return ErrnoStatus("read");
  }
}

}  // namespace capsule::ttrpc
