// VhostUserServer: the back-end ("slave") side of the vhost-user protocol on
// a unix socket QEMU connects to. It negotiates features, maps guest memory,
// configures the device's virtqueues and watches their kick eventfds on the
// event loop; the device (a VhostUserBackend) does the data path.
// One front end at a time; after it disconnects the next may connect. A
// client that leaves without sending a request (a liveness probe) is not
// reported as the front end going away.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/common/logging.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/guest_memory.h"
#include "runtime/vsock/vhost_user_backend.h"
#include "runtime/vsock/vhost_user_channel.h"

namespace capsule::vsock {

class VhostUserServer;
using VhostUserServerPtr = std::unique_ptr<VhostUserServer>;

class VhostUserServer {
 public:
  // Runs on the loop thread when a front end leaves; `why` says how.
  using DisconnectFn = std::function<void(const Status& why)>;

  // Listens on `socket_path` (removed again on destruction).
  static Result<VhostUserServerPtr> Listen(EventLoop& loop, const std::string& socket_path,
                                           VhostUserBackend& backend, DisconnectFn on_disconnect);
  // Serves one already-connected front end (vhost-user's --fd convention,
  // tests, fuzzing); nothing listens afterwards.
  static Result<VhostUserServerPtr> Serve(EventLoop& loop, UniqueFd connection, VhostUserBackend& backend,
                                          DisconnectFn on_disconnect);
  ~VhostUserServer();
  VhostUserServer(const VhostUserServer&) = delete;
  VhostUserServer& operator=(const VhostUserServer&) = delete;

  bool connected() const { return channel_ != nullptr; }
  const std::string& socket_path() const { return path_; }
  uint64_t acked_features() const { return acked_features_; }
  uint64_t acked_protocol_features() const { return acked_protocol_; }

 private:
  VhostUserServer(EventLoop& loop, std::string path, UniqueFd listen_fd, VhostUserBackend& backend,
                  DisconnectFn on_disconnect);
  void OnAccept();
  Status Attach(UniqueFd fd);
  void OnReadable(uint32_t events);
  void Disconnect(const Status& why);
  void Handle(vhost_user::Message& msg);

  // Request handlers. Those answering with a payload return it; the rest
  // return a Status that REPLY_ACK reports when the front end asks.
  Result<std::vector<uint8_t>> HandleWithReply(vhost_user::Message& msg);
  Status HandleNoReply(vhost_user::Message& msg);
  Status SetFeatures(const vhost_user::Message& msg);
  Status SetProtocolFeatures(const vhost_user::Message& msg);
  Status SetMemTable(vhost_user::Message& msg);
  Status SetVringNum(const vhost_user::Message& msg);
  Status SetVringAddr(const vhost_user::Message& msg);
  Status SetVringBase(const vhost_user::Message& msg);
  Result<std::vector<uint8_t>> GetVringBase(const vhost_user::Message& msg);
  Status SetVringKick(vhost_user::Message& msg);
  Status SetVringFd(vhost_user::Message& msg);
  Status SetVringEnable(const vhost_user::Message& msg);
  Result<std::vector<uint8_t>> GetConfig(const vhost_user::Message& msg);
  Status SetConfig(const vhost_user::Message& msg);
  Result<Virtqueue*> QueueAt(uint32_t index, std::string_view request);
  void StopQueue(uint32_t index);
  bool ProtocolFeaturesAcked() const { return (acked_features_ & vhost_user::kFeatureProtocolFeatures) != 0; }

  EventLoop& loop_;
  std::string path_;
  UniqueFd listen_fd_;
  VhostUserBackend& backend_;
  DisconnectFn on_disconnect_;
  std::unique_ptr<VhostUserChannel> channel_;
  GuestMemoryPtr mem_;
  uint64_t acked_features_ = 0;
  uint64_t acked_protocol_ = 0;
  uint64_t messages_ = 0;  // requests on the current connection
  log::Logger log_{"vhost-user"};
};

}  // namespace capsule::vsock
