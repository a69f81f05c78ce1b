// QMP client: synchronous handshake, then a reader thread that polls the
// socket and an eventfd. Commands wait on a condition variable for the reply
// carrying their id; the reader fails them all when the connection drops.
#include "runtime/hypervisor/qmp_client.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "runtime/common/fd_passing.h"
#include "runtime/common/logging.h"
#include "runtime/common/unix_stream.h"

namespace capsule::hypervisor {
namespace {

const log::Logger kQmpClientLog("qmp");
constexpr size_t kReadChunk = 64 * 1024;

int MsLeft(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

}  // namespace

Result<std::unique_ptr<QmpClient>> QmpClient::Connect(const std::string& socket_path, const Options& options) {
  // A listening socket accepts into its backlog even before QEMU's main loop
  // runs, so one try is enough; readiness is the greeting.
  auto fd = ConnectUnix(socket_path);
  if (!fd.ok()) return fd.status().WithContext(options.peer + ": QMP socket");
  return Open(std::move(*fd), options);
}

Result<std::unique_ptr<QmpClient>> QmpClient::Open(UniqueFd fd, const Options& options) {
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return ErrnoStatus("eventfd");
  std::unique_ptr<QmpClient> c(new QmpClient(std::move(fd), std::move(wake), options.peer));
  RETURN_IF_ERROR(c->Handshake(options));
  c->thread_ = std::thread([raw = c.get()] { raw->ReaderLoop(); });
  return c;
}

QmpClient::~QmpClient() { Close(); }

Result<QmpMessage> QmpClient::ReadMessageBlocking(std::chrono::steady_clock::time_point deadline, int abort_fd) {
  for (;;) {
    if (auto line = reader_.Next()) return ParseQmpMessage(*line);
    pollfd p[2] = {{fd_.get(), POLLIN, 0}, {abort_fd, POLLIN, 0}};
    int r = ::poll(p, abort_fd >= 0 ? 2 : 1, MsLeft(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("poll QMP socket");
    if (abort_fd >= 0 && (p[1].revents & POLLIN) != 0) return Unavailable(peer_ + ": VMM exited before QMP was ready");
    if (r == 0) return DeadlineExceeded(peer_ + ": no QMP greeting/reply before the deadline");
    char buf[kReadChunk];
    ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(peer_ + ": read QMP socket");
    if (n == 0) return Unavailable(peer_ + ": QMP connection closed during handshake");
    RETURN_IF_ERROR(reader_.Feed(std::string_view(buf, static_cast<size_t>(n))));
  }
}

Status QmpClient::Handshake(const Options& options) {
  auto deadline = std::chrono::steady_clock::now() + options.handshake_timeout;
  ASSIGN_OR_RETURN(QmpMessage first, ReadMessageBlocking(deadline, options.abort_fd));
  auto* greeting = std::get_if<QmpGreeting>(&first);
  if (greeting == nullptr) return InvalidArgument(peer_ + ": first QMP message is not a greeting");
  greeting_ = std::move(*greeting);
  RETURN_IF_ERROR(SendAll(EncodeQmpCommand("qmp_capabilities", nullptr, 0)));
  for (;;) {
    ASSIGN_OR_RETURN(QmpMessage msg, ReadMessageBlocking(deadline, options.abort_fd));
    if (auto* reply = std::get_if<QmpReply>(&msg)) {
      if (!reply->ok) return QmpErrorStatus("qmp_capabilities", *reply).WithContext(peer_);
      if (reply->id == 0u) return Status::Ok();
      return InvalidArgument(peer_ + ": unexpected QMP reply during handshake");
    }
    // Events cannot precede capability negotiation in QEMU; tolerate them anyway.
  }
}

Status QmpClient::SendAll(const std::string& data, int pass_fd) {
  std::lock_guard lock(write_mu_);
  std::string_view rest = data;
  while (!rest.empty()) {
    // The fd rides on the command's first bytes; QEMU takes it from the
    // message that carries them.
    ssize_t n = SendWithFd(fd_.get(), rest.data(), rest.size(), pass_fd);
    if (n < 0) return ErrnoStatus(peer_ + (pass_fd >= 0 ? ": send fd on QMP socket" : ": write QMP socket"));
    pass_fd = -1;
    rest.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Result<nlohmann::json> QmpClient::Execute(std::string_view command, const nlohmann::json& arguments,
                                          std::chrono::milliseconds timeout) {
  return ExecuteImpl(command, arguments, -1, timeout);
}

Result<nlohmann::json> QmpClient::ExecuteWithFd(std::string_view command, const nlohmann::json& arguments, int fd,
                                                std::chrono::milliseconds timeout) {
  // A closed or bogus fd would make sendmsg fail with a bare EBADF.
  if (fd < 0 || ::fcntl(fd, F_GETFD) < 0)
    return InvalidArgument(fmt::format("{}: QMP {}: fd {} is not an open file descriptor", peer_, command, fd));
  return ExecuteImpl(command, arguments, fd, timeout);
}

Result<nlohmann::json> QmpClient::ExecuteImpl(std::string_view command, const nlohmann::json& arguments, int pass_fd,
                                              std::chrono::milliseconds timeout) {
  auto pending = std::make_shared<Pending>();
  uint64_t id;
  {
    std::lock_guard lock(mu_);
    if (closed_) return Unavailable(fmt::format("{}: QMP {}: connection closed ({})", peer_, command, close_reason_));
    id = next_id_++;
    pending_[id] = pending;
  }
  kQmpClientLog.Debug("{} -> {} {}{}", peer_, command, JsonForLog(arguments), pass_fd >= 0 ? " (+fd)" : "");
  Status sent = SendAll(EncodeQmpCommand(command, arguments, id), pass_fd);
  std::unique_lock lock(mu_);
  if (!sent.ok()) {
    pending_.erase(id);
    return sent.WithContext(fmt::format("QMP {}", command));
  }
  bool done = cv_.wait_for(lock, timeout, [&] { return pending->done || closed_; });
  pending_.erase(id);
  if (pending->done) {
    if (!pending->reply.ok) return QmpErrorStatus(command, pending->reply).WithContext(peer_);
    return std::move(pending->reply.value);
  }
  if (closed_) return Unavailable(fmt::format("{}: QMP {}: connection closed ({})", peer_, command, close_reason_));
  (void)done;
  return DeadlineExceeded(fmt::format("{}: QMP {}: no reply within {} ms", peer_, command, timeout.count()));
}

int QmpClient::Subscribe(EventCallback callback) {
  std::lock_guard lock(mu_);
  int token = next_token_++;
  subscribers_[token] = std::make_shared<EventCallback>(std::move(callback));
  return token;
}

void QmpClient::Unsubscribe(int token) {
  {
    std::lock_guard lock(mu_);
    subscribers_.erase(token);
  }
  // A dispatch in flight may hold a copy of the callback: wait it out.
  if (std::this_thread::get_id() != thread_.get_id()) std::lock_guard wait(dispatch_mu_);
}

std::shared_ptr<QmpClient::EventWaiter> QmpClient::Expect(std::string event_name,
                                                          std::function<bool(const nlohmann::json&)> match) {
  auto w = std::make_shared<EventWaiter>();
  w->name_ = std::move(event_name);
  w->match_ = std::move(match);
  w->client_ = this;
  std::lock_guard lock(mu_);
  if (closed_) {
    w->closed_ = true;
  } else {
    waiters_.push_back(w);
  }
  return w;
}

Result<QmpEvent> QmpClient::EventWaiter::Wait(std::chrono::milliseconds timeout) {
  QmpClient* c = client_;
  std::unique_lock lock(c->mu_);
  c->cv_.wait_for(lock, timeout, [&] { return event_.has_value() || closed_; });
  if (event_) return std::move(*event_);
  // Unregister so a later event is not delivered to nobody.
  std::erase_if(c->waiters_, [this](const auto& w) { return w.get() == this; });
  if (closed_) return Unavailable(fmt::format("{}: connection closed while waiting for {} ({})", c->peer_, name_, c->close_reason_));
  return DeadlineExceeded(fmt::format("{}: no {} event within {} ms", c->peer_, name_, timeout.count()));
}

void QmpClient::ReaderLoop() {
  char buf[kReadChunk];
  for (;;) {
    // First what is already buffered: the handshake may have read past the
    // capabilities reply.
    while (auto line = reader_.Next()) {
      auto msg = ParseQmpMessage(*line);
      if (!msg.ok()) return MarkClosed(msg.status().message());
      Dispatch(std::move(*msg));
    }
    pollfd p[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    int r = ::poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return MarkClosed(fmt::format("poll: {}", std::strerror(errno)));
    if ((p[1].revents & POLLIN) != 0) return MarkClosed("closed by client");
    ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return MarkClosed(fmt::format("read: {}", std::strerror(errno)));
    if (n == 0) {
      if (reader_.buffered() > 0) return MarkClosed("peer closed mid-message");
      return MarkClosed("peer closed the connection");
    }
    Status fed = reader_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    if (!fed.ok()) return MarkClosed(fed.message());
  }
}

void QmpClient::Dispatch(QmpMessage msg) {
  if (auto* event = std::get_if<QmpEvent>(&msg)) return DispatchEvent(*event);
  auto* reply = std::get_if<QmpReply>(&msg);
  if (reply == nullptr) {
    kQmpClientLog.Warn("{}: ignoring a second QMP greeting", peer_);
    return;
  }
  std::lock_guard lock(mu_);
  auto it = reply->id ? pending_.find(*reply->id) : pending_.end();
  if (it == pending_.end()) {
    // A reply to a command that timed out, or an error QEMU could not tie to
    // an id (it failed to parse our input): nobody waits for it.
    kQmpClientLog.Warn("{}: unmatched QMP reply (id {}): {} {}", peer_, reply->id ? std::to_string(*reply->id) : "none",
                       reply->error_class, reply->error_desc);
    return;
  }
  it->second->reply = std::move(*reply);
  it->second->done = true;
  cv_.notify_all();
}

void QmpClient::DispatchEvent(const QmpEvent& event) {
  // Before the copy of the callbacks: an Unsubscribe that got dispatch_mu_
  // after its erase can no longer meet a stale copy.
  std::lock_guard dispatching(dispatch_mu_);
  kQmpClientLog.Debug("{} event {} {}", peer_, event.name, JsonForLog(event.data));
  std::vector<std::shared_ptr<EventCallback>> callbacks;
  {
    std::lock_guard lock(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      auto& w = *it;
      if (w->name_ == event.name && (!w->match_ || w->match_(event.data))) {
        w->event_ = event;
        it = waiters_.erase(it);
        cv_.notify_all();
      } else {
        ++it;
      }
    }
    for (auto& [token, cb] : subscribers_) callbacks.push_back(cb);
  }
  // Outside mu_, so a callback may Subscribe/Unsubscribe or Expect.
  for (auto& cb : callbacks) (*cb)(event);
}

void QmpClient::MarkClosed(std::string reason) {
  std::lock_guard lock(mu_);
  closed_ = true;
  close_reason_ = std::move(reason);
  for (auto& w : waiters_) w->closed_ = true;
  waiters_.clear();
  cv_.notify_all();
  kQmpClientLog.Debug("{}: QMP connection closed: {}", peer_, close_reason_);
}

bool QmpClient::connected() const {
  std::lock_guard lock(mu_);
  return !closed_;
}

std::string QmpClient::close_reason() const {
  std::lock_guard lock(mu_);
  return close_reason_;
}

bool QmpClient::WaitClosed(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return closed_; });
}

void QmpClient::Close() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
    thread_.join();
  }
  std::lock_guard lock(mu_);
  if (!closed_) {
    closed_ = true;
    close_reason_ = "closed by client";
    for (auto& w : waiters_) w->closed_ = true;
    waiters_.clear();
    cv_.notify_all();
  }
  // shutdown, not close: a command racing with Close() must not write to a
  // recycled descriptor number. The fd itself closes with the object.
  if (fd_) ::shutdown(fd_.get(), SHUT_RDWR);
}

}  // namespace capsule::hypervisor
