// SerialFrontend: the host end of a vsock carried on a virtio-serial port.
// It listens on the unix socket QEMU's virtserialport chardev connects to
// (-chardev socket,path=... or an fd the launcher connected for it), takes
// one connection as the VM's port and runs a VsockStreamLink with the host's
// muxer on it. The guest's agent runs the other end (agent/vsock_link).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/common/logging.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/stream_link.h"
#include "runtime/vsock/vsock_muxer.h"

namespace capsule::vsock {

class SerialFrontend;
using SerialFrontendPtr = std::unique_ptr<SerialFrontend>;

class SerialFrontend {
 public:
  using GoneFn = std::function<void(const Status& why)>;

  // `on_gone` runs on the loop when the VM's port connection ends.
  static Result<SerialFrontendPtr> Listen(EventLoop& loop, const std::string& socket_path,
                                          VsockMuxer::Options muxer_options, GoneFn on_gone);
  ~SerialFrontend();  // closes the link and every stream, removes the socket file
  SerialFrontend(const SerialFrontend&) = delete;
  SerialFrontend& operator=(const SerialFrontend&) = delete;

  // A host client's hybrid CONNECT; closed at once while no VM is attached.
  void ConnectToGuest(UniqueFd client, uint32_t guest_port);
  bool attached() const { return link_ != nullptr && !link_->lost(); }
  size_t connection_count() const { return attached() ? link_->muxer().connection_count() : 0; }

 private:
  SerialFrontend(EventLoop& loop, std::string path, UniqueFd listen_fd, VsockMuxer::Options options, GoneFn on_gone)
      : loop_(loop),
        path_(std::move(path)),
        listen_fd_(std::move(listen_fd)),
        options_(std::move(options)),
        on_gone_(std::move(on_gone)) {}
  void OnAccept();

  EventLoop& loop_;
  std::string path_;
  UniqueFd listen_fd_;
  VsockMuxer::Options options_;
  GoneFn on_gone_;
  VsockStreamLinkPtr link_;
  log::Logger log_{"vsock-serial"};
};

}  // namespace capsule::vsock
