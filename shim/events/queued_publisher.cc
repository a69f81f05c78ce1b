// See queued_publisher.h. The worker holds no lock while it sends, so
// Publish() only ever waits for a queue push.
#include "shim/events/queued_publisher.h"

#include <time.h>

#include <algorithm>

#include "runtime/common/logging.h"

namespace capsule::shim::events {
namespace {

const log::Logger kQueuedPublisherLog("shim.events");

bool Retryable(const Status& st) {
  return st.code() == Code::kUnavailable || st.code() == Code::kDeadlineExceeded ||
         st.code() == Code::kResourceExhausted || st.code() == Code::kCancelled;
}

}  // namespace

void SetTimestamp(int64_t unix_nanos, google::protobuf::Timestamp* out) {
  out->set_seconds(unix_nanos / 1000000000);
  out->set_nanos(static_cast<int32_t>(unix_nanos % 1000000000));
}

google::protobuf::Any PackBare(const google::protobuf::Message& message) {
  google::protobuf::Any any;
  any.set_type_url(message.GetDescriptor()->full_name());
  any.set_value(message.SerializeAsString());
  return any;
}

QueuedPublisher::QueuedPublisher(std::string ns, SenderPtr sender, QueueOptions options)
    : ns_(std::move(ns)), sender_(std::move(sender)), options_(options) {
  worker_ = std::thread([this] { Loop(); });
}

QueuedPublisher::~QueuedPublisher() { Close(std::chrono::milliseconds(0)); }

void QueuedPublisher::Publish(std::string_view topic, const google::protobuf::Message& event) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  ev::Envelope env;
  env.mutable_timestamp()->set_seconds(now.tv_sec);
  env.mutable_timestamp()->set_nanos(static_cast<int32_t>(now.tv_nsec));
  env.set_namespace_(ns_);
  env.set_topic(std::string(topic));
  *env.mutable_event() = PackBare(event);
  {
    std::lock_guard lock(mu_);
    if (closing_) {
      kQueuedPublisherLog.Warn("publisher closed; dropping {} event", topic);
      return;
    }
    if (queue_.size() >= options_.max_queued) {
      kQueuedPublisherLog.Error("event queue full ({}); dropping the oldest event {}", queue_.size(),
                                queue_.front().topic());
      queue_.pop_front();
    }
    queue_.push_back(std::move(env));
  }
  cv_.notify_all();
}

size_t QueuedPublisher::delivered() const {
  std::lock_guard lock(mu_);
  return delivered_;
}

bool QueuedPublisher::Stopping(Clock::time_point* deadline) {
  std::lock_guard lock(mu_);
  if (closing_) *deadline = close_deadline_;
  return closing_;
}

bool QueuedPublisher::Deliver(const ev::Envelope& envelope) {
  const auto give_up = Clock::now() + options_.retry_window;
  auto backoff = options_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    Status st = sender_->Send(envelope);
    if (st.ok()) {
      kQueuedPublisherLog.Debug("published {} via {}", envelope.topic(), sender_->Describe());
      return true;
    }
    Clock::time_point close_deadline{};
    const bool stopping = Stopping(&close_deadline);
    const auto now = Clock::now();
    if (!Retryable(st) || now + backoff > give_up || (stopping && now + backoff > close_deadline)) {
      kQueuedPublisherLog.Error("dropping {} event after {} attempt(s) via {}: {}", envelope.topic(), attempt,
                                sender_->Describe(), st.ToString());
      return false;
    }
    if (attempt == 1)
      kQueuedPublisherLog.Warn("publish {} via {}: {}; retrying", envelope.topic(), sender_->Describe(), st.ToString());
    std::unique_lock lock(mu_);
    // A Close() with a short deadline cuts the wait short.
    cv_.wait_for(lock, backoff, [&] { return closing_ && Clock::now() + backoff > close_deadline_; });
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void QueuedPublisher::Loop() {
  for (;;) {
    ev::Envelope env;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing and drained
      if (closing_ && Clock::now() >= close_deadline_) {
        kQueuedPublisherLog.Error("shim exiting: dropping {} undelivered event(s), first {}", queue_.size(),
                                  queue_.front().topic());
        queue_.clear();
        return;
      }
      env = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!Deliver(env)) continue;
    std::lock_guard lock(mu_);
    ++delivered_;
  }
}

void QueuedPublisher::Close(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(mu_);
    if (!closing_) {
      closing_ = true;
      close_deadline_ = Clock::now() + timeout;
    }
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

}  // namespace capsule::shim::events
