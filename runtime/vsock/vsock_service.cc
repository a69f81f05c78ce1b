// Start-up order: the device, then QEMU's socket, then the hybrid socket, so
// by the time either socket accepts, everything it leads to exists.
#include "runtime/vsock/vsock_service.h"

#include <fmt/format.h>

namespace capsule::vsock {

Status ValidateServiceOptions(const VsockServiceOptions& o) {
  if (o.vhost_user_socket.empty()) return InvalidArgument("vhost-user socket path is empty");
  if (o.uds_path.empty()) return InvalidArgument("hybrid vsock socket path (uds path) is empty");
  if (o.vhost_user_socket == o.uds_path)
    return InvalidArgument("vhost-user socket and hybrid socket are the same path " + o.uds_path);
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
  VsockMuxer::Options mo{options.guest_cid, options.uds_path, options.buf_alloc, options.connect_timeout,
                         options.close_timeout};
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

VsockService::~VsockService() {
  listener_.reset();
  server_.reset();
  device_.reset();
}

}  // namespace capsule::vsock
