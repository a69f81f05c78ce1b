#include "runtime/common/line_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include <fmt/format.h>

namespace capsule::line_io {

int MillisLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

Status WaitFor(int fd, short events, Deadline deadline, std::string_view what, std::string_view waiting_for) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, MillisLeft(deadline));
    if (r > 0) return Status::Ok();
    if (r == 0) return DeadlineExceeded(fmt::format("{}: no {} in time", what, waiting_for));
    if (errno != EINTR) return ErrnoStatus(fmt::format("{}: poll", what));
  }
}

Status WriteAll(int fd, std::string_view data, Deadline deadline, std::string_view what) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, what, "room to write"));
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      return Unavailable(fmt::format("{}: the peer closed the stream", what));
    return ErrnoStatus(fmt::format("{}: send", what));
  }
  return Status::Ok();
}

Result<std::string> ReadLine(int fd, size_t max, Deadline deadline, std::string_view what) {
  std::string line;
  while (line.size() < max) {
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    if (n == 1) {
      line += c;
      if (c == '\n') return line;
      continue;
    }
    if (n == 0) return Unavailable(fmt::format("{}: the peer closed the stream", what));
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      if (errno == ECONNRESET) return Unavailable(fmt::format("{}: the peer reset the stream", what));
      return ErrnoStatus(fmt::format("{}: recv", what));
    }
    RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, what, "line"));
  }
  return line;
}

}  // namespace capsule::line_io
