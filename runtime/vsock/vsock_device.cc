// Queue processing. tx: every chain is parsed, routed and returned at once
// (payload is written to the host or copied into a bounded buffer before the
// chain goes back), so a slow host reader never stalls the tx queue. rx: a
// chain is taken only when the muxer has a packet, and given back untouched
// when it turns out to have none.
#include "runtime/vsock/vsock_device.h"

#include <endian.h>
#include <fmt/format.h>

#include <cstring>

#include "runtime/vsock/vhost_user_protocol.h"
#include "runtime/vsock/vsock_packet.h"

namespace capsule::vsock {
namespace {

// Chains handled per queue per pump before yielding to other loop events.
constexpr int kBatchBudget = 256;
// struct virtio_vsock_config: le64 guest_cid (virtio spec 5.10.4).
constexpr uint32_t kConfigSize = 8;

}  // namespace

VsockDevice::VsockDevice(EventLoop& loop, VsockMuxer::Options options)
    : loop_(loop), muxer_(loop, std::move(options), [this] { Pump(); }) {}

VsockDevice::~VsockDevice() {
  if (pump_scheduled_) loop_.CancelTimer(pump_timer_);
}

uint64_t VsockDevice::Features() const {
  return kFeatureVersion1 | kFeatureRingEventIdx | vhost_user::kFeatureProtocolFeatures;
}

uint64_t VsockDevice::ProtocolFeatures() const {
  // CONFIG: QEMU reads guest_cid at realize. REPLY_ACK: QEMU learns when a
  // request failed. MQ: only so GET_QUEUE_NUM can report our 3 queues.
  return vhost_user::kProtocolMq | vhost_user::kProtocolReplyAck | vhost_user::kProtocolConfig;
}

Result<std::vector<uint8_t>> VsockDevice::ReadConfig(uint32_t offset, uint32_t size) const {
  if (offset > kConfigSize || size > kConfigSize - offset)
    return InvalidArgument(fmt::format("config read at {} size {} beyond the {}-byte vsock config", offset, size,
                                       kConfigSize));
  uint64_t cid = htole64(guest_cid());
  uint8_t raw[kConfigSize];
  std::memcpy(raw, &cid, sizeof raw);
  return std::vector<uint8_t>(raw + offset, raw + offset + size);
}

void VsockDevice::OnQueuesChanged() {
  bool ready = queues_[kRxQueue].ready() && queues_[kTxQueue].ready();
  bool was_ready = muxer_.guest_ready();
  if (was_ready && !ready) {
    stopped_at_[kRxQueue] = queues_[kRxQueue].last_avail_idx();
    stopped_at_[kTxQueue] = queues_[kTxQueue].last_avail_idx();
  }
  if (!was_ready && ready) {
    // QEMU stops the rings when the VM pauses and restores their indices on
    // resume; after a reset (guest reboot) the driver starts again from 0
    // and the guest's sockets are gone, so ours must go too.
    bool restarted = queues_[kRxQueue].last_avail_idx() == 0 && queues_[kTxQueue].last_avail_idx() == 0;
    if (restarted && (stopped_at_[kRxQueue] != 0 || stopped_at_[kTxQueue] != 0) && muxer_.connection_count() > 0) {
      log_.Info("guest vsock driver was reset: closing {} host streams", muxer_.connection_count());
      muxer_.Reset();
    }
    stopped_at_[kRxQueue] = stopped_at_[kTxQueue] = 0;
  }
  if (ready != was_ready) log_.Info("guest vsock driver {}", ready ? "ready" : "stopped");
  muxer_.set_guest_ready(ready);
  Pump();
}

void VsockDevice::OnKick(uint32_t index) {
  if (index == kEventQueue) return;  // we never post events
  Pump();
}

void VsockDevice::OnFrontendGone() {
  muxer_.set_guest_ready(false);
  muxer_.Reset();
  if (pump_scheduled_) loop_.CancelTimer(pump_timer_);
  pump_scheduled_ = false;
}

void VsockDevice::SchedulePump() {
  if (pump_scheduled_) return;
  pump_scheduled_ = true;
  pump_timer_ = loop_.AddTimer(EventLoop::Clock::now(), [this] {
    pump_scheduled_ = false;
    Pump();
  });
}

void VsockDevice::Pump() {
  if (in_pump_) return;  // the outer pump picks up whatever was added
  in_pump_ = true;
  bool tx_done = ProcessTx();
  bool rx_done = ProcessRx();
  // rx may have drained the replies that paused tx.
  if (tx_done && !muxer_.replies_full() && queues_[kTxQueue].HasAvailable()) tx_done = false;
  in_pump_ = false;
  if (!tx_done || !rx_done) SchedulePump();
}

bool VsockDevice::ProcessTx() {
  Virtqueue& q = queues_[kTxQueue];
  bool any = false;
  bool done = true;
  for (int budget = kBatchBudget;; --budget) {
    if (!q.ready()) break;
    if (muxer_.replies_full()) break;  // resumes when rx drains the replies
    if (budget == 0) {
      done = false;
      break;
    }
    PopResult p = q.Pop();
    if (!p.error.empty()) {
      ++malformed_;
      any = true;
      log_.Warn("tx queue: dropping malformed chain: {}", p.error);
      continue;
    }
    if (!p.chain) {
      if (q.ArmKickAndRecheck()) continue;
      break;
    }
    Result<TxPacket> pkt = ParseTxPacket(*p.chain);
    if (pkt.ok()) {
      log_.Trace("guest -> host: {}", pkt->hdr.ToString());
      muxer_.OnGuestPacket(*pkt);
    } else {
      ++malformed_;
      log_.Warn("tx queue: dropping malformed packet: {}", pkt.status().message());
    }
    q.PushUsed(p.chain->head, 0);
    any = true;
  }
  if (any) q.NotifyIfNeeded();
  return done;
}

bool VsockDevice::ProcessRx() {
  Virtqueue& q = queues_[kRxQueue];
  bool any = false;
  bool done = true;
  for (int budget = kBatchBudget; q.ready() && muxer_.WantsRx(); --budget) {
    if (budget == 0) {
      done = false;
      break;
    }
    PopResult p = q.Pop();
    if (!p.error.empty()) {
      any = true;
      log_.Warn("rx queue: dropping malformed chain: {}", p.error);
      continue;
    }
    if (!p.chain) {
      if (q.ArmKickAndRecheck()) continue;
      break;  // the guest kicks when it posts buffers
    }
    if (!p.chain->readable.empty() || p.chain->writable_len < kPacketHeaderSize) {
      log_.Warn("rx queue: buffer {} unusable ({} writable bytes, {} readable)", p.chain->head,
                p.chain->writable_len, p.chain->readable_len);
      q.PushUsed(p.chain->head, 0);
      any = true;
      continue;
    }
    uint32_t n = muxer_.FillRx(*p.chain);
    if (n == 0) {
      q.Unpop();
      break;
    }
    q.PushUsed(p.chain->head, n);
    any = true;
  }
  if (any) q.NotifyIfNeeded();
  return done;
}

}  // namespace capsule::vsock
