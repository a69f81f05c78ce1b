// VhostUserBackend: what a device tells the generic vhost-user server
// (features, queues, config space) and hears back from it (acked features,
// queue state changes, kicks, front-end loss). The vsock device implements
// it; tests can drive the server with any other device.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/vsock/virtqueue.h"

namespace capsule::vsock {

class VhostUserBackend {
 public:
  virtual ~VhostUserBackend() = default;

  // Virtio feature bits offered, including VHOST_USER_F_PROTOCOL_FEATURES.
  virtual uint64_t Features() const = 0;
  virtual uint64_t ProtocolFeatures() const = 0;
  virtual uint32_t NumQueues() const = 0;
  virtual Virtqueue& queue(uint32_t index) = 0;
  // Device config space bytes [offset, offset+size).
  virtual Result<std::vector<uint8_t>> ReadConfig(uint32_t offset, uint32_t size) const = 0;

  virtual void SetAckedFeatures(uint64_t features) = 0;
  // A queue started, stopped, was enabled/disabled or remapped.
  virtual void OnQueuesChanged() = 0;
  // The driver made buffers available on queue `index`.
  virtual void OnKick(uint32_t index) = 0;
  // The front end disconnected: guest memory and queues are about to go.
  virtual void OnFrontendGone() = 0;
};

}  // namespace capsule::vsock
