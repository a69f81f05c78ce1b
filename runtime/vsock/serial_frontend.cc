// One VM port per back end: a second connection while the first is attached
// is refused, as the vhost-user server refuses a second front end.
#include "runtime/vsock/serial_frontend.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock {

Result<SerialFrontendPtr> SerialFrontend::Listen(EventLoop& loop, const std::string& socket_path,
                                                 VsockMuxer::Options muxer_options, GoneFn on_gone) {
  ASSIGN_OR_RETURN(UniqueFd fd, ListenUnix(socket_path, 1));
  SerialFrontendPtr fe(new SerialFrontend(loop, socket_path, std::move(fd), std::move(muxer_options), std::move(on_gone)));
  SerialFrontend* self = fe.get();
  Status s = loop.Add(self->listen_fd_.get(), EPOLLIN, [self](uint32_t) { self->OnAccept(); });
  if (!s.ok()) return s.WithContext("watch serial socket " + socket_path);
  return fe;
}

SerialFrontend::~SerialFrontend() {
  link_.reset();
  if (listen_fd_) {
    loop_.Remove(listen_fd_.get());
    ::unlink(path_.c_str());
  }
}

void SerialFrontend::OnAccept() {
  UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd) {
    if (errno != EAGAIN && errno != EINTR) log_.Warn("accept on {}: {}", path_, std::strerror(errno));
    return;
  }
  if (attached()) {
    log_.Warn("refused a second VM port on {}: one is already attached", path_);
    return;
  }
  Result<VsockStreamLinkPtr> link = VsockStreamLink::Start(loop_, std::move(fd), options_, [this](const Status& why) {
    if (link_ == nullptr || !link_->lost()) return;
    link_.reset();
    log_.Info("VM port on {} gone: {}", path_, why.message());
    if (on_gone_) on_gone_(why);
  });
  if (!link.ok()) {
    log_.Error("attach VM port: {}", link.status().ToString());
    return;
  }
  link_ = std::move(link).value();
  log_.Info("VM port attached on {}", path_);
}

void SerialFrontend::ConnectToGuest(UniqueFd client, uint32_t guest_port) {
  if (!attached()) {
    log_.Info("CONNECT {} refused: no VM port attached", guest_port);
    return;
  }
  link_->muxer().ConnectToGuest(std::move(client), guest_port);
}

}  // namespace capsule::vsock
