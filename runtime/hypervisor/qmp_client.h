// QmpClient: one QMP connection. Connect() reads the greeting and negotiates
// capabilities on the caller's thread; then a reader thread matches replies
// to commands by id, hands events to subscribers and waiters, and notices a
// closed connection at once (every waiting command fails UNAVAILABLE).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/hypervisor/qmp_protocol.h"

namespace capsule::hypervisor {

inline constexpr std::chrono::milliseconds kQmpDefaultCommandTimeout{10000};

class QmpClient {
 public:
  using EventCallback = std::function<void(const QmpEvent&)>;

  struct Options {
    // Deadline for greeting + qmp_capabilities.
    std::chrono::milliseconds handshake_timeout{10000};
    // Optional fd that becomes readable when waiting is pointless (the VMM's
    // pidfd): the handshake then fails at once instead of timing out.
    int abort_fd = -1;
    // Names the peer in errors and logs ("vm pod1").
    std::string peer = "QMP";
  };

  // A one-shot expectation of an event, registered before the command that
  // causes it so the event cannot slip by in between. Must not outlive the
  // client that made it.
  class EventWaiter {
   public:
    // The matching event; DEADLINE_EXCEEDED or UNAVAILABLE (connection lost).
    Result<QmpEvent> Wait(std::chrono::milliseconds timeout);

   private:
    friend class QmpClient;
    std::string name_;
    std::function<bool(const nlohmann::json&)> match_;
    std::optional<QmpEvent> event_;  // guarded by the client's mu_
    bool closed_ = false;            // guarded by the client's mu_
    QmpClient* client_ = nullptr;
  };

  static Result<std::unique_ptr<QmpClient>> Connect(const std::string& socket_path, const Options& options);
  // Same over an already connected stream socket.
  static Result<std::unique_ptr<QmpClient>> Open(UniqueFd fd, const Options& options);

  ~QmpClient();
  QmpClient(const QmpClient&) = delete;
  QmpClient& operator=(const QmpClient&) = delete;

  const QmpGreeting& greeting() const { return greeting_; }

  // Runs one command; the "return" payload, or the QMP error as a Status
  // naming the command. Must not be called from an event callback.
  Result<nlohmann::json> Execute(std::string_view command, const nlohmann::json& arguments = nullptr,
                                 std::chrono::milliseconds timeout = kQmpDefaultCommandTimeout);
  // Same, with `fd` sent alongside the command (SCM_RIGHTS), for QMP's
  // getfd / add-fd. The peer receives a copy; `fd` stays the caller's.
  // INVALID_ARGUMENT if `fd` is not open.
  Result<nlohmann::json> ExecuteWithFd(std::string_view command, const nlohmann::json& arguments, int fd,
                                       std::chrono::milliseconds timeout = kQmpDefaultCommandTimeout);

  // Callbacks run on the reader thread, in arrival order; keep them short.
  int Subscribe(EventCallback callback);
  // Once it returns the callback neither runs nor will run, so whatever it
  // captured may go (called from a callback, it cannot wait for itself).
  // It waits for a callback in flight: do not call it holding a lock that
  // the callback takes.
  void Unsubscribe(int token);

  // `match` sees the event's data; nullptr matches any event of that name.
  std::shared_ptr<EventWaiter> Expect(std::string event_name,
                                      std::function<bool(const nlohmann::json&)> match = nullptr);

  bool connected() const;
  // Why the connection ended ("" while connected).
  std::string close_reason() const;
  // Waits until the connection has closed; false on timeout.
  bool WaitClosed(std::chrono::milliseconds timeout);
  // Closes the connection and joins the reader. Idempotent.
  void Close();

 private:
  struct Pending {
    bool done = false;
    QmpReply reply;
  };

  QmpClient(UniqueFd fd, UniqueFd wake, std::string peer) : fd_(std::move(fd)), wake_(std::move(wake)), peer_(std::move(peer)) {}
  Status Handshake(const Options& options);
  Result<QmpMessage> ReadMessageBlocking(std::chrono::steady_clock::time_point deadline, int abort_fd);
  Result<nlohmann::json> ExecuteImpl(std::string_view command, const nlohmann::json& arguments, int pass_fd,
                                     std::chrono::milliseconds timeout);
  // Writes `data`; a `pass_fd` >= 0 goes with its first bytes.
  Status SendAll(const std::string& data, int pass_fd = -1);
  void ReaderLoop();
  void Dispatch(QmpMessage msg);
  void DispatchEvent(const QmpEvent& event);
  void MarkClosed(std::string reason);

  UniqueFd fd_;
  UniqueFd wake_;  // eventfd: Close() wakes the reader
  std::string peer_;
  QmpGreeting greeting_;
  QmpLineReader reader_;  // touched by the handshake, then only by the reader thread
  std::thread thread_;

  std::mutex write_mu_;  // serializes whole command lines on the socket
  std::mutex dispatch_mu_;  // held by the reader while it runs callbacks

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_id_ = 1;                                   // guarded by mu_
  std::map<uint64_t, std::shared_ptr<Pending>> pending_;   // guarded by mu_
  std::map<int, std::shared_ptr<EventCallback>> subscribers_;  // guarded by mu_
  int next_token_ = 1;                                     // guarded by mu_
  std::vector<std::shared_ptr<EventWaiter>> waiters_;      // guarded by mu_
  bool closed_ = false;                                    // guarded by mu_
  std::string close_reason_;                               // guarded by mu_
};

}  // namespace capsule::hypervisor
