// VsockService: everything one VM's vsock back end needs, wired on one
// event loop: the VM's end (a vhost-user-vsock device with the socket QEMU
// connects to, or a virtio-serial port's socket), and the hybrid unix socket
// host programs dial. capsule-vsockd runs one; tests run
// one in-process against a fake driver.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/common/status.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/hybrid_listener.h"
#include "runtime/vsock/serial_frontend.h"
#include "runtime/vsock/vhost_user_server.h"
#include "runtime/vsock/vsock_device.h"

namespace capsule::vsock {

// CIDs 0-2 are reserved (hypervisor, local, host) and U32_MAX is
// VMADDR_CID_ANY; Linux keeps CIDs in 32 bits.
inline constexpr uint64_t kMinGuestCid = 3;
inline constexpr uint64_t kMaxGuestCid = 0xfffffffeu;

struct VsockServiceOptions {
  // Exactly one: QEMU's vhost-user-vsock chardev, or its virtserialport's.
  std::string vhost_user_socket;
  std::string serial_socket;
  std::string uds_path;           // hybrid socket; guest->host port P uses uds_path + "_P"
  uint64_t guest_cid = kMinGuestCid;
  uint32_t buf_alloc = kDefaultBufAlloc;
  std::chrono::milliseconds connect_timeout = kConnectTimeout;
  std::chrono::milliseconds close_timeout = kCloseTimeout;
};

Status ValidateServiceOptions(const VsockServiceOptions& o);

class VsockService;
using VsockServicePtr = std::unique_ptr<VsockService>;

class VsockService {
 public:
  // `on_frontend_gone` runs on the loop when QEMU disconnects.
  static Result<VsockServicePtr> Start(EventLoop& loop, const VsockServiceOptions& options,
                                       VhostUserServer::DisconnectFn on_frontend_gone);
  // Closes every stream and removes both socket files.
  ~VsockService();
  VsockService(const VsockService&) = delete;
  VsockService& operator=(const VsockService&) = delete;

  // vhost-user only.
  VsockDevice& device() { return *device_; }
  VhostUserServer& server() { return *server_; }
  // serial only.
  SerialFrontend& serial() { return *serial_; }
  // Streams open now, either way.
  size_t connection_count() const;
  const VsockServiceOptions& options() const { return options_; }

 private:
  explicit VsockService(VsockServiceOptions options) : options_(std::move(options)) {}

  VsockServiceOptions options_;
  // Declaration order matters: the server and listener refer to the device,
  // so they are destroyed first.
  std::unique_ptr<VsockDevice> device_;
  VhostUserServerPtr server_;
  SerialFrontendPtr serial_;
  HybridListenerPtr listener_;
};

}  // namespace capsule::vsock
