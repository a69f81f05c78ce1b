// Start-up order: the device, then QEMU's socket, then the hybrid socket, so
// by the time either socket accepts, everything it leads to exists.
#include "runtime/vsock/vsock_service.h"

#include <fmt/format.h>

namespace capsule::vsock {

Status ValidateServiceOptions(const VsockServiceOptions& o) {
  if (o.vhost_user_socket.empty() == o.serial_socket.empty())
    return InvalidArgument("give exactly one of the vhost-user socket and the serial socket");
  if (o.uds_path.empty()) return InvalidArgument("hybrid vsock socket path (uds path) is empty");
  if (o.vhost_user_socket == o.uds_path || o.serial_socket == o.uds_path)
    return InvalidArgument("the VM's socket and the hybrid socket are the same path " + o.uds_path);
  if (o.guest_cid < kMinGuestCid || o.guest_cid > kMaxGuestCid)
    return InvalidArgument(fmt::format("guest cid {} outside {}..{}", o.guest_cid, kMinGuestCid, kMaxGuestCid));
  if (o.buf_alloc < kMaxPacketPayload)
    return InvalidArgument(fmt::format("buf_alloc {} below one packet ({} bytes)", o.buf_alloc, kMaxPacketPayload));
  return Status::Ok();
}

Result<VsockServicePtr> VsockService::Start(EventLoop& loop, const VsockServiceOptions& options,
                                            VhostUserServer::DisconnectFn on_frontend_gone) {
  RETURN_IF_ERROR(ValidateServiceOptions(options));
  VsockServicePtr svc(new VsockService(options));
  VsockMuxer::Options mo;
  mo.peer_cid = options.guest_cid;
  mo.uds_path = options.uds_path;
  mo.buf_alloc = options.buf_alloc;
  mo.connect_timeout = options.connect_timeout;
  mo.close_timeout = options.close_timeout;
  if (!options.serial_socket.empty()) {
    ASSIGN_OR_RETURN(svc->serial_,
                     SerialFrontend::Listen(loop, options.serial_socket, mo, std::move(on_frontend_gone)));
    SerialFrontend* fe = svc->serial_.get();
    ASSIGN_OR_RETURN(svc->listener_,
                     HybridListener::Listen(loop, options.uds_path, [fe](UniqueFd client, uint32_t port) {
                       fe->ConnectToGuest(std::move(client), port);
                     }));
    return svc;
  }
  svc->device_ = std::make_unique<VsockDevice>(loop, mo);
  ASSIGN_OR_RETURN(svc->server_, VhostUserServer::Listen(loop, options.vhost_user_socket, *svc->device_,
                                                         std::move(on_frontend_gone)));
  VsockDevice* dev = svc->device_.get();
  ASSIGN_OR_RETURN(svc->listener_,
                   HybridListener::Listen(loop, options.uds_path, [dev](UniqueFd client, uint32_t port) {
                     dev->muxer().ConnectToGuest(std::move(client), port);
                   }));
  return svc;
}

size_t VsockService::connection_count() const {
  if (serial_) return serial_->connection_count();
  return device_ ? device_->muxer().connection_count() : 0;
}

VsockService::~VsockService() {
  listener_.reset();
  server_.reset();
  serial_.reset();
  device_.reset();
}

}  // namespace capsule::vsock
