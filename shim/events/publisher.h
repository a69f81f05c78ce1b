// Publisher: how the shim tells containerd about task events (/tasks/create,
// /tasks/exit, ...). Publish() only queues, so a slow or restarting
// containerd never blocks a Task call; a worker thread delivers the queue in
// order through a Sender (ttrpc Events/Forward, or the -publish-binary).
#pragma once

#include <google/protobuf/any.pb.h>
#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "containerd/services/events/ttrpc/v1/events.pb.h"
#include "runtime/common/status.h"

namespace capsule::shim::events {

namespace ev = ::containerd::services::events::ttrpc::v1;

// Topics (containerd's runtime/events.go).
inline constexpr std::string_view kTaskCreate = "/tasks/create";
inline constexpr std::string_view kTaskStart = "/tasks/start";
inline constexpr std::string_view kTaskExit = "/tasks/exit";
inline constexpr std::string_view kTaskDelete = "/tasks/delete";
inline constexpr std::string_view kTaskExecAdded = "/tasks/exec-added";
inline constexpr std::string_view kTaskExecStarted = "/tasks/exec-started";
inline constexpr std::string_view kTaskOOM = "/tasks/oom";
inline constexpr std::string_view kTaskPaused = "/tasks/paused";
inline constexpr std::string_view kTaskResumed = "/tasks/resumed";

// Nanoseconds since the epoch -> protobuf Timestamp.
void SetTimestamp(int64_t unix_nanos, google::protobuf::Timestamp* out);

// An Any with the bare type_url containerd's typeurl registry expects
// ("containerd.events.TaskExit"), not "type.googleapis.com/...".
google::protobuf::Any PackBare(const google::protobuf::Message& message);

class Publisher {
 public:
  virtual ~Publisher() = default;
  // Queues the event, stamped now, for delivery; never blocks on containerd.
  virtual void Publish(std::string_view topic, const google::protobuf::Message& event) = 0;
  // Delivers what is queued for up to `timeout`, then drops the rest; later
  // Publish calls are dropped. Idempotent.
  virtual void Close(std::chrono::milliseconds timeout) = 0;
};
using PublisherPtr = std::unique_ptr<Publisher>;

// One delivery attempt of one envelope.
class Sender {
 public:
  virtual ~Sender() = default;
  // UNAVAILABLE/DEADLINE_EXCEEDED are worth retrying; other codes are not.
  virtual Status Send(const ev::Envelope& envelope) = 0;
  virtual std::string Describe() const = 0;
};
using SenderPtr = std::unique_ptr<Sender>;

}  // namespace capsule::shim::events
