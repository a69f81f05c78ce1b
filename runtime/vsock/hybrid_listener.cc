// Handshake reading peeks for the newline and then consumes exactly the
// line, so bytes a client pipelines after "CONNECT n\n" stay in the socket
// for the guest stream.
#include "runtime/vsock/hybrid_listener.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock {

std::optional<uint32_t> ParseConnectLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  constexpr std::string_view kVerb = "CONNECT ";
  if (line.substr(0, kVerb.size()) != kVerb) return std::nullopt;
  std::string_view digits = line.substr(kVerb.size());
  while (!digits.empty() && digits.front() == ' ') digits.remove_prefix(1);
  if (digits.empty() || digits.size() > 10) return std::nullopt;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(v);
}

Result<HybridListenerPtr> HybridListener::Listen(EventLoop& loop, const std::string& path, ConnectFn on_connect) {
  ASSIGN_OR_RETURN(UniqueFd fd, ListenUnix(path));
  HybridListenerPtr l(new HybridListener(loop, path, std::move(fd), std::move(on_connect)));
  HybridListener* self = l.get();
  Status s = loop.Add(self->listen_fd_.get(), EPOLLIN, [self](uint32_t) { self->OnAccept(); });
  if (!s.ok()) return s.WithContext("watch hybrid socket " + path);
  return l;
}

HybridListener::HybridListener(EventLoop& loop, std::string path, UniqueFd fd, ConnectFn on_connect)
    : loop_(loop), path_(std::move(path)), listen_fd_(std::move(fd)), on_connect_(std::move(on_connect)) {}

HybridListener::~HybridListener() {
  for (auto& [fd, p] : pending_) {
    loop_.Remove(fd);
    loop_.CancelTimer(p.timer);
  }
  pending_.clear();
  loop_.Remove(listen_fd_.get());
  ::unlink(path_.c_str());
}

void HybridListener::OnAccept() {
  for (;;) {
    UniqueFd c(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!c) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
        log_.Warn("accept on {}: {}", path_, std::strerror(errno));
      return;
    }
    if (pending_.size() >= kMaxPendingHandshakes) {
      log_.Warn("dropping a client of {}: {} handshakes already pending", path_, pending_.size());
      continue;
    }
    int fd = c.get();
    // Edge-triggered: peeking leaves the bytes queued, so level mode would spin.
    Status s = loop_.Add(fd, EPOLLIN | EPOLLRDHUP | EPOLLET, [this, fd](uint32_t) { OnClientReadable(fd); });
    if (!s.ok()) {
      log_.Warn("watch hybrid client: {}", s.ToString());
      continue;
    }
    EventLoop::TimerId t = loop_.AddTimer(EventLoop::Clock::now() + kHandshakeTimeout,
                                          [this, fd] { Drop(fd, "no CONNECT line in time"); });
    pending_[fd] = Pending{std::move(c), t};
  }
}

void HybridListener::Drop(int fd, std::string_view why) {
  auto it = pending_.find(fd);
  if (it == pending_.end()) return;
  log_.Info("closing hybrid client: {}", why);
  loop_.Remove(fd);
  loop_.CancelTimer(it->second.timer);
  pending_.erase(it);
}

void HybridListener::OnClientReadable(int fd) {
  auto it = pending_.find(fd);
  if (it == pending_.end()) return;
  char buf[kMaxHandshakeLine];
  ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) return Drop(fd, n == 0 ? "closed before CONNECT" : std::strerror(errno));
  const char* nl = static_cast<const char*>(std::memchr(buf, '\n', static_cast<size_t>(n)));
  if (nl == nullptr) {
    if (static_cast<size_t>(n) == sizeof buf) Drop(fd, "CONNECT line too long");
    return;  // wait for the rest of the line
  }
  size_t line_len = static_cast<size_t>(nl - buf) + 1;
  (void)!::recv(fd, buf, line_len, MSG_DONTWAIT);  // consume exactly the line
  std::optional<uint32_t> port = ParseConnectLine(std::string_view(buf, line_len - 1));
  if (!port) return Drop(fd, "malformed handshake line (want \"CONNECT <port>\\n\")");
  UniqueFd client = std::move(it->second.fd);
  loop_.Remove(fd);
  loop_.CancelTimer(it->second.timer);
  pending_.erase(it);
  on_connect_(std::move(client), *port);
}

}  // namespace capsule::vsock
