// VsockDevice: the virtio-vsock device model behind QEMU's
// vhost-user-vsock-pci. It offers the features and config space (guest_cid)
// QEMU asks for and moves packets between the guest's virtqueues (rx 0,
// tx 1; QEMU keeps the event queue 2 to itself) and the unix back end
// (VsockMuxer). All work runs on the event loop, in bounded batches.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "runtime/common/logging.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/vhost_user_backend.h"
#include "runtime/vsock/virtqueue.h"
#include "runtime/vsock/vsock_muxer.h"

namespace capsule::vsock {

// Queue indices (virtio spec 5.10.2).
inline constexpr uint32_t kRxQueue = 0;
inline constexpr uint32_t kTxQueue = 1;
inline constexpr uint32_t kEventQueue = 2;
inline constexpr uint32_t kNumQueues = 3;

// Virtio feature bits we offer (virtio spec 6): VERSION_1 and EVENT_IDX.
// No INDIRECT_DESC, no SEQPACKET, no packed ring.
inline constexpr uint64_t kFeatureVersion1 = 1ULL << 32;
inline constexpr uint64_t kFeatureRingEventIdx = 1ULL << 29;

class VsockDevice : public VhostUserBackend {
 public:
  VsockDevice(EventLoop& loop, VsockMuxer::Options options);
  ~VsockDevice() override;

  VsockMuxer& muxer() { return muxer_; }
  uint64_t guest_cid() const { return muxer_.options().peer_cid; }

  // VhostUserBackend
  uint64_t Features() const override;
  uint64_t ProtocolFeatures() const override;
  uint32_t NumQueues() const override { return kNumQueues; }
  Virtqueue& queue(uint32_t index) override { return queues_[index]; }
  Result<std::vector<uint8_t>> ReadConfig(uint32_t offset, uint32_t size) const override;
  void SetAckedFeatures(uint64_t features) override { acked_ = features; }
  void OnQueuesChanged() override;
  void OnKick(uint32_t index) override;
  void OnFrontendGone() override;

  // Guest packets dropped as malformed so far (tests, logs).
  uint64_t malformed_packets() const { return malformed_; }

 private:
  // Returns false when its batch budget ran out with work left.
  bool ProcessTx();
  bool ProcessRx();
  void Pump();
  void SchedulePump();

  EventLoop& loop_;
  VsockMuxer muxer_;
  std::array<Virtqueue, kNumQueues> queues_;
  uint64_t acked_ = 0;
  // Avail indices when the queues last stopped; a restart from 0 after a
  // non-zero stop means the driver was reset, not the VM paused.
  uint16_t stopped_at_[2] = {0, 0};
  bool pump_scheduled_ = false;
  EventLoop::TimerId pump_timer_ = 0;
  bool in_pump_ = false;
  uint64_t malformed_ = 0;
  log::Logger log_{"vsock-device"};
};

}  // namespace capsule::vsock
