#include "runtime/common/byte_relay.h"

#include "runtime/common/file_util.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <memory>

#include <fmt/format.h>

namespace capsule {
namespace {

constexpr size_t kBufferBytes = 64 * 1024;

// One direction: reads `from`, writes `to`.
struct Pipe {
  int from = -1;
  int to = -1;
  char from_name = 'a';
  char to_name = 'b';
  std::unique_ptr<std::array<char, kBufferBytes>> buf = std::make_unique<std::array<char, kBufferBytes>>();
  size_t begin = 0;
  size_t end = 0;
  bool eof = false;  // `from` ended and `to` was shut for writing
  uint64_t moved = 0;

  bool empty() const { return begin == end; }
  bool done() const { return eof && empty(); }
};

bool IsReset(int err) { return err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == EHOSTUNREACH; }

// Moves what it can without blocking. Fails with the side that broke.
Status Pump(Pipe& p, std::string_view what) {
  for (;;) {
    if (!p.empty()) {
      ssize_t n = ::send(p.to, p.buf->data() + p.begin, p.end - p.begin, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return Status::Ok();
        return Unavailable(fmt::format("{}: side {}: {}", what, p.to_name,
                                       IsReset(errno) ? "reset by its peer" : ErrnoStatus("send").message()));
      }
      p.begin += static_cast<size_t>(n);
      p.moved += static_cast<uint64_t>(n);
      if (!p.empty()) return Status::Ok();
      p.begin = p.end = 0;
    }
    if (p.eof) return Status::Ok();
    ssize_t n = ::recv(p.from, p.buf->data(), p.buf->size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return Status::Ok();
      return Unavailable(fmt::format("{}: side {}: {}", what, p.from_name,
                                     IsReset(errno) ? "reset by its peer" : ErrnoStatus("recv").message()));
    }
    if (n == 0) {
      p.eof = true;
      ::shutdown(p.to, SHUT_WR);
      return Status::Ok();
    }
    p.end = static_cast<size_t>(n);
  }
}

short Wants(const Pipe& p, bool reader) {
  if (reader) return !p.eof && p.empty() ? POLLIN : 0;
  return p.empty() ? 0 : POLLOUT;
}

}  // namespace

void ResetOnClose(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

Status Relay(int a, int b, int stop_fd, std::string_view what, RelayStats* stats) {
  for (int fd : {a, b}) RETURN_IF_ERROR_CTX(SetNonBlocking(fd), what);
  Pipe ab{a, b, 'a', 'b'};
  Pipe ba{b, a, 'b', 'a'};
  auto finish = [&](Status st) {
    if (stats) *stats = {ab.moved, ba.moved};
    if (!st.ok()) {
      // The side that broke is gone or reset; make the other see a reset too.
      ResetOnClose(a);
      ResetOnClose(b);
    }
    return st;
  };
  // A socket that hung up while nothing was waited on from it (so poll
  // would report it again at once, forever) is no longer polled. Bytes
  // that later come for it fail on their send, which resets the other side.
  bool hung_up[2] = {false, false};
  while (!(ab.done() && ba.done())) {
    pollfd fds[3] = {{hung_up[0] ? -1 : a, static_cast<short>(Wants(ab, true) | Wants(ba, false)), 0},
                     {hung_up[1] ? -1 : b, static_cast<short>(Wants(ba, true) | Wants(ab, false)), 0},
                     {stop_fd, POLLIN, 0}};
    const nfds_t n = stop_fd >= 0 ? 3 : 2;
    if (::poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      return finish(ErrnoStatus(fmt::format("{}: poll", what)));
    }
    if (n == 3 && fds[2].revents != 0) return finish(Cancelled(fmt::format("{}: stopped", what)));
    if ((fds[0].revents | fds[1].revents) & POLLNVAL) return finish(Internal(fmt::format("{}: a closed fd", what)));
    // A hang-up or error shows as readable/writable to the calls below,
    // which then name it.
    if (Status st = Pump(ab, what); !st.ok()) return finish(st);
    if (Status st = Pump(ba, what); !st.ok()) return finish(st);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && fds[i].events == 0 && (fds[i].revents & (POLLERR | POLLHUP))) hung_up[i] = true;
    }
    // Both hung up and nothing left to move: nobody can send any more.
    if (hung_up[0] && hung_up[1] && ab.empty() && ba.empty()) break;
  }
  return finish(Status::Ok());
}

}  // namespace capsule
