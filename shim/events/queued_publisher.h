// QueuedPublisher: the Publisher every shim uses. Events are stamped and
// queued by Publish(); one worker thread sends them in order through a
// Sender, retrying transient failures (containerd restarting) with backoff,
// so /tasks/create always reaches containerd before /tasks/start, and
// /tasks/exit before /tasks/delete.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "shim/events/publisher.h"

namespace capsule::shim::events {

struct QueueOptions {
  std::chrono::milliseconds initial_backoff{50};
  std::chrono::milliseconds max_backoff{2000};
  // How long one event is retried before it is dropped (with an error log):
  // long enough to ride out a containerd restart.
  std::chrono::milliseconds retry_window{120000};
  // Bound on queued events; beyond it the oldest is dropped (logged).
  size_t max_queued = 10000;
};

class QueuedPublisher : public Publisher {
 public:
  QueuedPublisher(std::string ns, SenderPtr sender, QueueOptions options = {});
  ~QueuedPublisher() override;  // Close(0)

  void Publish(std::string_view topic, const google::protobuf::Message& event) override;
  void Close(std::chrono::milliseconds timeout) override;

  // Events delivered so far (for tests and logs).
  size_t delivered() const;

 private:
  using Clock = std::chrono::steady_clock;
  void Loop();
  // Sends one envelope until it succeeds (true), fails for good, or the
  // close deadline passes. Called without mu_ held.
  bool Deliver(const ev::Envelope& envelope);
  bool Stopping(Clock::time_point* deadline);

  const std::string ns_;
  const SenderPtr sender_;
  const QueueOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ev::Envelope> queue_;      // guarded by mu_
  bool closing_ = false;                // guarded by mu_
  Clock::time_point close_deadline_{};  // guarded by mu_
  size_t delivered_ = 0;                // guarded by mu_
  std::thread worker_;
};

}  // namespace capsule::shim::events
