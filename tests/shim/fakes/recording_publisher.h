// RecordingPublisher: keeps every published event (topic + Any) in order
// and lets a test wait for one, instead of sending it to containerd.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "shim/events/publisher.h"

namespace capsule::testing {

class RecordingPublisher : public shim::events::Publisher {
 public:
  struct Event {
    std::string topic;
    google::protobuf::Any any;
  };
  void Publish(std::string_view topic, const google::protobuf::Message& event) override {
    std::lock_guard lock(mu_);
    events_.push_back({std::string(topic), shim::events::PackBare(event)});
    cv_.notify_all();
  }
  void Close(std::chrono::milliseconds) override {}

  std::vector<Event> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<std::string> topics() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> t;
    for (const auto& e : events_) t.push_back(e.topic);
    return t;
  }
  // Waits until `count` events of `topic` were published; false on timeout.
  bool WaitFor(const std::string& topic, size_t count = 1,
               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      size_t n = 0;
      for (const auto& e : events_) n += e.topic == topic ? 1 : 0;
      return n >= count;
    });
  }
  template <typename T>
  T Last(const std::string& topic) const {
    std::lock_guard lock(mu_);
    T msg;
    for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
      if (it->topic == topic) {
        msg.ParseFromString(it->any.value());
        break;
      }
    }
    return msg;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Event> events_;
};

}  // namespace capsule::testing
