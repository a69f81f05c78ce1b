// One accepted ttrpc connection on the server side. A reader thread decodes
// frames and hands each call to the connection's WorkerPool; handlers write
// their responses themselves, one whole frame at a time under write_mu_, so
// responses leave in completion order. When the peer closes its side, calls
// already read still run and answer (a half-closed peer gets its responses)
// before the socket is shut; on a protocol violation or a local Close() the
// socket is shut at once, calls not yet started are dropped and running
// ones finish. Then the connection reports itself done.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/ttrpc/handler_registry.h"
#include "runtime/ttrpc/server_protocol.h"
#include "runtime/ttrpc/worker_pool.h"

namespace capsule::ttrpc {

class ServerConnection {
 public:
  // `registry` must outlive the connection. `on_finished` runs on the reader
  // thread once the connection is done; it must not destroy the connection.
  ServerConnection(UniqueFd fd, std::string name, const HandlerRegistry& registry,
                   size_t max_inflight, std::function<void()> on_finished);
  ~ServerConnection();  // Close(), then joins the reader (and so every handler)
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  // Starts the reader thread. Throws std::system_error if no thread can be made.
  void Start();
  // Shuts the socket down both ways; the reader then winds the connection up.
  void Close();

  const std::string& name() const { return name_; }

 private:
  void ReadLoop();
  void ShutdownSocket();
  // False when the connection must close.
  bool HandleFrame(DecodedFrame frame);
  void Dispatch(InboundCall call);
  void RunCall(const InboundCall& call);
  void WriteResponse(uint32_t stream_id, const Status& status, std::string payload);

  UniqueFd fd_;
  const std::string name_;
  const HandlerRegistry& registry_;
  const size_t max_inflight_;
  std::function<void()> on_finished_;
  RequestStream stream_;  // reader thread only
  std::atomic<size_t> inflight_{0};  // calls admitted whose handler has not returned
  WorkerPool pool_;
  std::atomic<bool> closed_locally_{false};  // Close() was called
  std::mutex write_mu_;  // serialises frames written to fd_
  std::thread reader_;
};

}  // namespace capsule::ttrpc
