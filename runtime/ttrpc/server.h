// ttrpc server: serves registered "service/method" handlers on unix sockets
// or already-connected fds. Each request runs on its own worker so a handler
// that blocks (containerd's Wait) never stalls other calls on the connection;
// responses go out in completion order under a per-connection write lock.
#pragma once

#include <google/protobuf/message_lite.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/ttrpc/context.h"

namespace capsule::ttrpc {

// Request payload bytes in; response payload bytes, or a Status that goes
// back as Response.status.
using RawHandler = std::function<Result<std::string>(const CallContext&, std::string_view payload)>;

struct ServerOptions {
  // Accept a connection only from a peer whose SO_PEERCRED uid passes; unset
  // accepts any peer. The shim allows only its own uid (containerd's).
  std::function<bool(uid_t peer_uid)> authorize_uid;
  // Upper bound on concurrently running handlers per connection; a request
  // beyond it is answered RESOURCE_EXHAUSTED at once (never queued behind
  // handlers that may block for minutes). Threads are made on demand and
  // leave after 30 s idle.
  size_t max_inflight_per_connection = 128;
};

class Server {
 public:
  explicit Server(ServerOptions options = {});
  ~Server();  // Shutdown()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // May be called at any time (also while serving); registering the same
  // service/method again replaces the handler for later calls.
  void Register(const std::string& service, const std::string& method, RawHandler handler);

  // Typed registration: a payload that does not parse as Req answers
  // INVALID_ARGUMENT without calling `fn`.
  template <typename Req, typename Resp>
  void RegisterMethod(const std::string& service, const std::string& method,
                      std::function<Result<Resp>(const CallContext&, const Req&)> fn) {
    Register(service, method,
             [fn = std::move(fn), method](const CallContext& ctx, std::string_view payload)
                 -> Result<std::string> {
               Req req;
               if (!req.ParseFromArray(payload.data(), static_cast<int>(payload.size())))
                 return InvalidArgument("ttrpc: cannot parse request of " + method);
               Result<Resp> resp = fn(ctx, req);
               if (!resp.ok()) return std::move(resp).status();
               return resp->SerializeAsString();
             });
  }

  // Binds and listens on a unix socket path (mode applied to the socket
  // file). The path must not exist.
  Status Listen(const std::string& path, mode_t mode = 0600);
  // Serves an already-listening socket (e.g. inherited from a parent).
  Status ListenFd(UniqueFd listening_fd);
  // Serves one already-connected stream socket (e.g. a vsock connection).
  // authorize_uid applies here too: a socket without SO_PEERCRED is then
  // refused (PERMISSION_DENIED). O_NONBLOCK is cleared.
  Status ServeConnection(UniqueFd connected_fd);

  // Stops accepting, closes connections, waits for running handlers (a
  // handler that never returns blocks Shutdown), and removes a socket file
  // created by Listen(). Idempotent; later Listen/Serve calls fail.
  void Shutdown();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsule::ttrpc
