// Virtqueue: the device side of one split virtqueue (virtio 1.x, 2.7) in
// shared guest memory: pops descriptor chains from the available ring as
// host iovecs, returns them on the used ring and decides when the driver
// needs an interrupt (VIRTIO_RING_F_EVENT_IDX or the NO_INTERRUPT flag).
// Indirect descriptors are not offered, so a chain using one is malformed.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/guest_memory.h"

namespace capsule::vsock {

// One available buffer: device-readable iovecs first, then device-writable.
struct DescChain {
  uint16_t head = 0;
  std::vector<iovec> readable;
  std::vector<iovec> writable;
  uint64_t readable_len = 0;
  uint64_t writable_len = 0;
};

// The result of popping: a chain, nothing available, or a malformed chain
// (already returned to the driver with length 0; `error` says why).
struct PopResult {
  std::optional<DescChain> chain;
  std::string error;
};

class Virtqueue {
 public:
  // Largest queue size accepted; virtio's split ring maximum.
  static constexpr uint32_t kMaxSize = 32768;

  Virtqueue() = default;
  Virtqueue(const Virtqueue&) = delete;
  Virtqueue& operator=(const Virtqueue&) = delete;

  // --- configuration (VHOST_USER_SET_VRING_*) ---
  // Back to the state before any configuration (front end gone or reset).
  void Reset();
  Status SetSize(uint32_t size);
  void SetAddresses(uint64_t desc_uva, uint64_t avail_uva, uint64_t used_uva);
  void SetBase(uint16_t last_avail_idx) {
    last_avail_idx_ = last_avail_idx;
    broken_ = false;
  }
  void SetEventIdx(bool on) { event_idx_ = on; }
  // Translates the ring addresses through `mem` (nullptr clears them).
  Status Resolve(const GuestMemory* mem);
  bool resolved() const { return desc_ != nullptr; }
  // Test-and-fuzz entry: rings given by guest-physical address.
  Status ResolveGpa(const GuestMemory* mem, uint64_t desc, uint64_t avail, uint64_t used);

  void set_kick(UniqueFd fd) { kick_ = std::move(fd); }
  void set_call(UniqueFd fd) { call_ = std::move(fd); }
  void set_err(UniqueFd fd) { err_ = std::move(fd); }
  int kick_fd() const { return kick_.get(); }

  // Started: between SET_VRING_KICK and GET_VRING_BASE. Enabled: by
  // SET_VRING_ENABLE (or always, without VHOST_USER_F_PROTOCOL_FEATURES).
  void set_started(bool on);
  void set_enabled(bool on) { enabled_ = on; }
  bool started() const { return started_; }
  bool enabled() const { return enabled_; }
  // The device may move buffers: configured, started and enabled.
  // A queue whose avail index ran ahead of its size stays broken (not
  // ready) until the front end restarts or reconfigures it.
  bool ready() const { return started_ && enabled_ && !broken_ && resolved() && size_ != 0; }
  bool broken() const { return broken_; }

  uint16_t size() const { return size_; }
  uint16_t last_avail_idx() const { return last_avail_idx_; }

  // --- data path (only when ready()) ---
  bool HasAvailable() const;
  PopResult Pop();
  // Gives back the chain popped last (nothing was written to it).
  void Unpop() { --last_avail_idx_; }
  void PushUsed(uint16_t head, uint32_t len);
  // Interrupts the driver if it asked to hear about the used entries pushed
  // since the last interrupt. Returns true when it signalled.
  bool NotifyIfNeeded();
  // Before going idle on an empty queue: asks the driver to kick for new
  // buffers and re-checks; true when buffers arrived meanwhile.
  bool ArmKickAndRecheck();
  // Signals the error eventfd (QEMU logs it) after a malformed chain.
  void SignalError();

 private:
  // Copies of guest-controlled fields, read once each.
  uint16_t AvailIdx() const;
  uint16_t AvailRing(uint16_t slot) const;
  uint16_t AvailFlags() const;
  uint16_t UsedEvent() const;
  Status WalkChain(uint16_t head, DescChain* chain) const;

  const GuestMemory* mem_ = nullptr;
  uint16_t size_ = 0;
  uint64_t desc_uva_ = 0, avail_uva_ = 0, used_uva_ = 0;
  uint8_t* desc_ = nullptr;   // struct vring_desc[size]
  uint8_t* avail_ = nullptr;  // flags, idx, ring[size], used_event
  uint8_t* used_ = nullptr;   // flags, idx, ring[size]{id,len}, avail_event
  uint16_t last_avail_idx_ = 0;
  uint16_t used_idx_ = 0;        // our shadow of used->idx
  uint16_t signalled_used_ = 0;  // used_idx_ at the last interrupt
  bool signalled_valid_ = false;
  bool event_idx_ = false;
  bool started_ = false;
  bool enabled_ = false;
  bool broken_ = false;
  UniqueFd kick_, call_, err_;
};

}  // namespace capsule::vsock
