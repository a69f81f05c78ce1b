// HybridListener: the host-facing unix socket of Firecracker's hybrid vsock.
// A host client connects, writes "CONNECT <port>\n", and is handed over
// (with exactly that line consumed) to the muxer, which answers
// "OK <hostport>\n" once the guest accepts. A malformed or missing line
// (within kHandshakeTimeout) closes the client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "runtime/common/logging.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/event_loop.h"

namespace capsule::vsock {

// A client that has not sent its line by then is dropped.
inline constexpr std::chrono::milliseconds kHandshakeTimeout{5000};
// "CONNECT 4294967295\r\n" is 20 bytes; anything much longer is not a handshake.
inline constexpr size_t kMaxHandshakeLine = 64;
// Handshakes in progress at once; more clients are closed at accept.
inline constexpr size_t kMaxPendingHandshakes = 1024;

// Parses "CONNECT <port>" (trailing "\r" and spaces allowed, newline
// stripped by the caller). nullopt for anything else.
std::optional<uint32_t> ParseConnectLine(std::string_view line);

class HybridListener;
using HybridListenerPtr = std::unique_ptr<HybridListener>;

class HybridListener {
 public:
  // Gets each client whose handshake line parsed, non-blocking.
  using ConnectFn = std::function<void(UniqueFd client, uint32_t port)>;

  static Result<HybridListenerPtr> Listen(EventLoop& loop, const std::string& path, ConnectFn on_connect);
  ~HybridListener();  // closes pending clients, removes the socket file
  HybridListener(const HybridListener&) = delete;
  HybridListener& operator=(const HybridListener&) = delete;

  const std::string& path() const { return path_; }
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    UniqueFd fd;
    EventLoop::TimerId timer = 0;
  };
  HybridListener(EventLoop& loop, std::string path, UniqueFd fd, ConnectFn on_connect);
  void OnAccept();
  void OnClientReadable(int fd);
  void Drop(int fd, std::string_view why);

  EventLoop& loop_;
  std::string path_;
  UniqueFd listen_fd_;
  ConnectFn on_connect_;
  std::unordered_map<int, Pending> pending_;
  log::Logger log_{"vsock-hybrid"};
};

}  // namespace capsule::vsock
