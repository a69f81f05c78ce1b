// Server::Impl: one control thread per server polls the listening sockets
// and an eventfd; it accepts connections (checking the peer's uid) and
// destroys connections that finished. Each connection has its own reader
// thread and handler pool (server_connection.h).
#include "runtime/ttrpc/server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/ttrpc/handler_registry.h"
#include "runtime/ttrpc/server_connection.h"
#include "runtime/ttrpc/socket_io.h"
#include "runtime/ttrpc/unix_socket.h"

namespace capsule::ttrpc {
namespace {

const log::Logger kServerLog("ttrpc");

// After accept(2) fails for lack of fds or memory, pause this long before
// polling the listeners again instead of spinning on a readable socket.
constexpr int kAcceptBackoffMs = 100;


}  // namespace

class Server::Impl {
 public:
  explicit Impl(ServerOptions options) : options_(std::move(options)) {}
  ~Impl() { Shutdown(); }

  void Register(const std::string& service, const std::string& method, RawHandler handler) {
    registry_.Register(service, method, std::move(handler));
  }
  Status Listen(const std::string& path, mode_t mode);
  Status ListenFd(UniqueFd fd);
  Status ServeConnection(UniqueFd fd) {
    // Handed-over connection fds may come non-blocking; the reader threads rely on blocking reads.
    RETURN_IF_ERROR_CTX(SetNonBlocking(fd.get(), false), "ttrpc: serve connection");
    return Adopt(std::move(fd), "fd");
  }
  void Shutdown();

 private:
  struct Listener {
    UniqueFd fd;
    std::string path;  // unlinked at shutdown; empty for ListenFd
  };

  Status EnsureStartedLocked();
  Status AddListener(Listener listener);
  Status Adopt(UniqueFd fd, const std::string& origin);
  void OnConnectionFinished(uint64_t id);
  void ControlLoop();
  bool AcceptFrom(int listen_fd, const std::string& where);  // false: back off
  void ReapFinished();
  void Wake();

  const ServerOptions options_;
  HandlerRegistry registry_;

  std::mutex mu_;
  bool shut_down_ = false;               // guarded by mu_
  UniqueFd wake_fd_;                     // eventfd; set once under mu_
  std::thread control_;                  // started once under mu_
  std::vector<Listener> listeners_;      // guarded by mu_; only grows until Shutdown
  uint64_t next_connection_id_ = 1;      // guarded by mu_
  std::map<uint64_t, std::unique_ptr<ServerConnection>> connections_;  // guarded by mu_
  std::vector<std::unique_ptr<ServerConnection>> finished_;            // guarded by mu_
};

Status Server::Impl::EnsureStartedLocked() {
  if (shut_down_) return FailedPrecondition("ttrpc: server is shut down");
  if (!wake_fd_) {
    wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_fd_) return ErrnoStatus("ttrpc: eventfd");
  }
  if (!control_.joinable()) {
    try {
      control_ = std::thread([this] { ControlLoop(); });
    } catch (const std::system_error& e) {
      return ResourceExhausted(std::string("ttrpc: cannot start server thread: ") + e.what());
    }
  }
  return Status::Ok();
}

Status Server::Impl::Listen(const std::string& path, mode_t mode) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    return AlreadyExists("ttrpc: listen on " + path + ": path already exists");
  }
  ASSIGN_OR_RETURN(UniqueFd fd, ListenUnix(path, mode));
  if (Status s = SetNonBlocking(fd.get()); !s.ok()) {
    ::unlink(path.c_str());
    return s.WithContext("ttrpc: listen on " + path);
  }
  Status added = AddListener(Listener{std::move(fd), path});
  if (!added.ok()) {
    ::unlink(path.c_str());
    return added;
  }
  kServerLog.Info("serving on {}", path);
  return Status::Ok();
}

Status Server::Impl::ListenFd(UniqueFd fd) {
  if (!IsListeningSocket(fd.get())) {
    return InvalidArgument("ttrpc: fd " + std::to_string(fd.get()) + " is not a listening socket");
  }
  RETURN_IF_ERROR_CTX(SetNonBlocking(fd.get()), "ttrpc: listening socket");
  return AddListener(Listener{std::move(fd), ""});
}

Status Server::Impl::AddListener(Listener listener) {
  {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(EnsureStartedLocked());
    listeners_.push_back(std::move(listener));
  }
  Wake();
  return Status::Ok();
}

Status Server::Impl::Adopt(UniqueFd fd, const std::string& origin) {
  std::string who = origin;
  if (options_.authorize_uid) {
    Result<uid_t> uid = PeerUid(fd.get());
    if (!uid.ok()) {
      return Status(Code::kPermissionDenied,
                    "ttrpc: cannot check the peer of a connection from " + origin + ": " +
                        uid.status().message());
    }
    if (!options_.authorize_uid(*uid)) {
      return Status(Code::kPermissionDenied, "ttrpc: peer uid " + std::to_string(*uid) +
                                                 " is not allowed (connection from " + origin + ")");
    }
    who += " uid " + std::to_string(*uid);
  }
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(EnsureStartedLocked());
  const uint64_t id = next_connection_id_++;
  auto conn = std::make_unique<ServerConnection>(
      std::move(fd), "conn " + std::to_string(id) + " (" + who + ")", registry_,
      options_.max_inflight_per_connection, [this, id] { OnConnectionFinished(id); });
  try {
    conn->Start();
  } catch (const std::system_error& e) {
    return ResourceExhausted(std::string("ttrpc: cannot start connection thread: ") + e.what());
  }
  kServerLog.Debug("{}: accepted", conn->name());
  connections_.emplace(id, std::move(conn));
  return Status::Ok();
}

void Server::Impl::OnConnectionFinished(uint64_t id) {
  {
    std::lock_guard lock(mu_);
    auto it = connections_.find(id);
    if (it == connections_.end()) return;  // Shutdown owns it now
    finished_.push_back(std::move(it->second));
    connections_.erase(it);
  }
  Wake();
}

void Server::Impl::Wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof one);
}

void Server::Impl::ControlLoop() {
  bool backoff = false;
  while (true) {
    std::vector<pollfd> fds;
    {
      std::lock_guard lock(mu_);
      if (shut_down_) return;
      fds.push_back({wake_fd_.get(), POLLIN, 0});
      if (!backoff) {
        for (const Listener& l : listeners_) fds.push_back({l.fd.get(), POLLIN, 0});
      }
    }
    int n = ::poll(fds.data(), fds.size(), backoff ? kAcceptBackoffMs : -1);
    backoff = false;
    if (n < 0 && errno != EINTR) {
      kServerLog.Error("server poll: {}", std::strerror(errno));
      backoff = true;
      continue;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t count;
      (void)!::read(wake_fd_.get(), &count, sizeof count);
      ReapFinished();
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      // listeners_ only grows (push_back) before Shutdown, and Shutdown
      // joins this thread before closing any, so entry i - 1 is this fd.
      int fd;
      std::string where;
      {
        std::lock_guard lock(mu_);
        fd = listeners_[i - 1].fd.get();
        where = listeners_[i - 1].path.empty() ? "inherited socket" : listeners_[i - 1].path;
      }
      if (!AcceptFrom(fd, where)) backoff = true;
    }
  }
}

bool Server::Impl::AcceptFrom(int listen_fd, const std::string& where) {
  UniqueFd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) {
    const int err = errno;
    if (err == EAGAIN || err == EINTR || err == ECONNABORTED) return true;
    kServerLog.Error("accept on {}: {}", where, std::strerror(err));
    return false;
  }
  Status st = Adopt(std::move(fd), where);
  if (!st.ok()) kServerLog.Warn("refused connection: {}", st.message());
  return true;
}

void Server::Impl::ReapFinished() {
  std::vector<std::unique_ptr<ServerConnection>> done;
  {
    std::lock_guard lock(mu_);
    done.swap(finished_);
  }
  done.clear();  // joins each reader thread, which has already returned or is returning
}

void Server::Impl::Shutdown() {
  std::vector<Listener> listeners;
  std::map<uint64_t, std::unique_ptr<ServerConnection>> connections;
  std::vector<std::unique_ptr<ServerConnection>> finished;
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (control_.joinable()) {
    Wake();
    control_.join();
  }
  {
    std::lock_guard lock(mu_);
    listeners.swap(listeners_);
    connections.swap(connections_);
    finished.swap(finished_);
  }
  for (Listener& l : listeners) {
    l.fd.reset();
    if (!l.path.empty() && ::unlink(l.path.c_str()) != 0 && errno != ENOENT) {
      kServerLog.Warn("unlink {}: {}", l.path, std::strerror(errno));
    }
  }
  // Close all first so connections wind down in parallel, then join each.
  for (auto& [id, conn] : connections) conn->Close();
  const size_t open = connections.size();
  connections.clear();
  finished.clear();
  kServerLog.Debug("server shut down ({} open connections closed)", open);
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Server::~Server() = default;

void Server::Register(const std::string& service, const std::string& method, RawHandler handler) {
  impl_->Register(service, method, std::move(handler));
}
Status Server::Listen(const std::string& path, mode_t mode) { return impl_->Listen(path, mode); }
Status Server::ListenFd(UniqueFd listening_fd) { return impl_->ListenFd(std::move(listening_fd)); }
Status Server::ServeConnection(UniqueFd connected_fd) {
  return impl_->ServeConnection(std::move(connected_fd));
}
void Server::Shutdown() { impl_->Shutdown(); }

}  // namespace capsule::ttrpc
