// Split-ring mechanics. The driver may change ring memory at any time, so
// each guest-written field is copied once before use, ring indices are read
// with acquire and published with release ordering, and every descriptor is
// bounds-checked against guest memory before it becomes an iovec.
#include "runtime/vsock/virtqueue.h"

#include <endian.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace capsule::vsock {
namespace {

// Flags from linux/virtio_ring.h (not includable from C++).
constexpr uint16_t kDescFNext = 1;
constexpr uint16_t kDescFWrite = 2;
constexpr uint16_t kDescFIndirect = 4;
constexpr uint16_t kAvailFNoInterrupt = 1;

// Layout sizes from the virtio spec (2.7.5-2.7.8) for a queue of `n`.
constexpr uint64_t kDescSize = 16;
uint64_t DescTableBytes(uint64_t n) { return kDescSize * n; }
uint64_t AvailRingBytes(uint64_t n) { return 4 + 2 * n + 2; }  // flags, idx, ring, used_event
uint64_t UsedRingBytes(uint64_t n) { return 4 + 8 * n + 2; }   // flags, idx, ring, avail_event

uint16_t LoadAcquire16(const uint8_t* p) {
  // NOLINTNEXTLINE: ring fields are aligned (checked in Resolve) and shared with the driver.
  std::atomic_ref<uint16_t> ref(*const_cast<uint16_t*>(reinterpret_cast<const uint16_t*>(p)));
  return le16toh(ref.load(std::memory_order_acquire));
}

void StoreRelease16(uint8_t* p, uint16_t v) {
  std::atomic_ref<uint16_t> ref(*reinterpret_cast<uint16_t*>(p));
  ref.store(htole16(v), std::memory_order_release);
}

bool Aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

}  // namespace

Status Virtqueue::SetSize(uint32_t size) {
  // Split rings need a power-of-two size (virtio 1.x 2.7).
  if (size == 0 || size > kMaxSize || (size & (size - 1)) != 0)
    return InvalidArgument(fmt::format("vring size {} is not a power of two in 1..{}", size, kMaxSize));
  size_ = static_cast<uint16_t>(size);
  return Status::Ok();
}

void Virtqueue::Reset() {
  mem_ = nullptr;
  size_ = 0;
  desc_uva_ = avail_uva_ = used_uva_ = 0;
  desc_ = avail_ = used_ = nullptr;
  last_avail_idx_ = used_idx_ = signalled_used_ = 0;
  signalled_valid_ = event_idx_ = started_ = enabled_ = broken_ = false;
  kick_.reset();
  call_.reset();
  err_.reset();
}

void Virtqueue::SetAddresses(uint64_t desc_uva, uint64_t avail_uva, uint64_t used_uva) {
  desc_uva_ = desc_uva;
  avail_uva_ = avail_uva;
  used_uva_ = used_uva;
}

Status Virtqueue::Resolve(const GuestMemory* mem) {
  desc_ = avail_ = used_ = nullptr;
  mem_ = mem;
  if (mem == nullptr || size_ == 0 || desc_uva_ == 0) return Status::Ok();  // not configured yet
  uint8_t* d = mem->UvaToHost(desc_uva_, DescTableBytes(size_));
  uint8_t* a = mem->UvaToHost(avail_uva_, AvailRingBytes(size_));
  uint8_t* u = mem->UvaToHost(used_uva_, UsedRingBytes(size_));
  if (d == nullptr || a == nullptr || u == nullptr)
    return InvalidArgument(fmt::format("vring (desc 0x{:x} avail 0x{:x} used 0x{:x}, size {}) outside guest memory",
                                       desc_uva_, avail_uva_, used_uva_, size_));
  if (!Aligned(d, 16) || !Aligned(a, 2) || !Aligned(u, 4))
    return InvalidArgument(fmt::format("vring (desc 0x{:x} avail 0x{:x} used 0x{:x}) misaligned", desc_uva_,
                                       avail_uva_, used_uva_));
  desc_ = d;
  avail_ = a;
  used_ = u;
  used_idx_ = LoadAcquire16(used_ + 2);
  signalled_valid_ = false;
  broken_ = false;
  return Status::Ok();
}

Status Virtqueue::ResolveGpa(const GuestMemory* mem, uint64_t desc, uint64_t avail, uint64_t used) {
  uint8_t* d = mem->GpaToHost(desc, DescTableBytes(size_));
  uint8_t* a = mem->GpaToHost(avail, AvailRingBytes(size_));
  uint8_t* u = mem->GpaToHost(used, UsedRingBytes(size_));
  if (size_ == 0 || d == nullptr || a == nullptr || u == nullptr) return InvalidArgument("vring outside guest memory");
  if (!Aligned(d, 16) || !Aligned(a, 2) || !Aligned(u, 4)) return InvalidArgument("vring misaligned");
  mem_ = mem;
  desc_ = d;
  avail_ = a;
  used_ = u;
  used_idx_ = LoadAcquire16(used_ + 2);
  signalled_valid_ = false;
  broken_ = false;
  return Status::Ok();
}

void Virtqueue::set_started(bool on) {
  started_ = on;
  broken_ = false;
  if (on && used_ != nullptr) {
    used_idx_ = LoadAcquire16(used_ + 2);
    signalled_valid_ = false;
  }
}

uint16_t Virtqueue::AvailIdx() const { return LoadAcquire16(avail_ + 2); }
uint16_t Virtqueue::AvailFlags() const { return LoadAcquire16(avail_); }
uint16_t Virtqueue::AvailRing(uint16_t slot) const { return LoadAcquire16(avail_ + 4 + 2 * uint64_t{slot}); }
uint16_t Virtqueue::UsedEvent() const { return LoadAcquire16(avail_ + 4 + 2 * uint64_t{size_}); }

bool Virtqueue::HasAvailable() const { return ready() && AvailIdx() != last_avail_idx_; }

Status Virtqueue::WalkChain(uint16_t head, DescChain* chain) const {
  uint16_t idx = head;
  for (uint32_t count = 1;; ++count) {
    // A chain longer than the table must revisit a descriptor: a loop.
    if (count > size_) return InvalidArgument(fmt::format("descriptor chain from {} loops", head));
    const uint8_t* d = desc_ + kDescSize * idx;
    uint64_t addr;
    uint32_t len;
    uint16_t flags, next;
    std::memcpy(&addr, d, 8);
    std::memcpy(&len, d + 8, 4);
    std::memcpy(&flags, d + 12, 2);
    std::memcpy(&next, d + 14, 2);
    addr = le64toh(addr);
    len = le32toh(len);
    flags = le16toh(flags);
    next = le16toh(next);
    if (flags & kDescFIndirect)
      return InvalidArgument(fmt::format("descriptor {} is indirect (not negotiated)", idx));
    bool writable = (flags & kDescFWrite) != 0;
    if (!writable && !chain->writable.empty())
      return InvalidArgument(fmt::format("descriptor {}: device-readable after device-writable", idx));
    if (len > 0 && !mem_->GpaToIovecs(addr, len, writable ? &chain->writable : &chain->readable))
      return InvalidArgument(fmt::format("descriptor {} [0x{:x}, +{}) outside guest memory", idx, addr, len));
    (writable ? chain->writable_len : chain->readable_len) += len;
    if ((flags & kDescFNext) == 0) return Status::Ok();
    if (next >= size_) return InvalidArgument(fmt::format("descriptor {}: next {} beyond queue size {}", idx, next, size_));
    idx = next;
  }
}

PopResult Virtqueue::Pop() {
  PopResult r;
  if (!ready()) return r;
  uint16_t avail = AvailIdx();
  if (avail == last_avail_idx_) return r;
  if (static_cast<uint16_t>(avail - last_avail_idx_) > size_) {
    // The driver claims more buffers than the ring holds: its state is
    // corrupt. Consume nothing; the next reset/restart resynchronises.
    r.error = fmt::format("avail idx {} is {} ahead of {} (queue size {})", avail,
                          static_cast<uint16_t>(avail - last_avail_idx_), last_avail_idx_, size_);
    broken_ = true;
    SignalError();
    return r;
  }
  uint16_t head = AvailRing(static_cast<uint16_t>(last_avail_idx_ % size_));
  ++last_avail_idx_;
  if (head >= size_) {
    r.error = fmt::format("avail ring head {} beyond queue size {}", head, size_);
    SignalError();
    return r;
  }
  DescChain chain;
  chain.head = head;
  Status s = WalkChain(head, &chain);
  if (!s.ok()) {
    PushUsed(head, 0);  // hand the buffer back untouched
    r.error = s.message();
    SignalError();
    return r;
  }
  r.chain = std::move(chain);
  return r;
}

void Virtqueue::PushUsed(uint16_t head, uint32_t len) {
  uint8_t* e = used_ + 4 + 8 * uint64_t{static_cast<uint16_t>(used_idx_ % size_)};
  uint32_t id_le = htole32(head);
  uint32_t len_le = htole32(len);
  std::memcpy(e, &id_le, 4);
  std::memcpy(e + 4, &len_le, 4);
  ++used_idx_;
  StoreRelease16(used_ + 2, used_idx_);
}

bool Virtqueue::NotifyIfNeeded() {
  if (!call_ || used_ == nullptr) return false;
  if (signalled_valid_ && used_idx_ == signalled_used_) return false;
  // Order our used->idx store before reading the driver's suppression field.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bool need;
  uint16_t old = signalled_used_;
  bool was_valid = signalled_valid_;
  signalled_used_ = used_idx_;
  signalled_valid_ = true;
  if (event_idx_) {
    uint16_t ev = UsedEvent();
    // vring_need_event(): interrupt when used_event lies in [old, new).
    need = !was_valid || static_cast<uint16_t>(used_idx_ - ev - 1) < static_cast<uint16_t>(used_idx_ - old);
  } else {
    need = (AvailFlags() & kAvailFNoInterrupt) == 0;
  }
  if (!need) return false;
  uint64_t one = 1;
  (void)!::write(call_.get(), &one, sizeof one);
  return true;
}

bool Virtqueue::ArmKickAndRecheck() {
  if (!ready()) return false;
  if (event_idx_) StoreRelease16(used_ + 4 + 8 * uint64_t{size_}, last_avail_idx_);  // avail_event
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return AvailIdx() != last_avail_idx_;
}

void Virtqueue::SignalError() {
  if (!err_) return;
  uint64_t one = 1;
  (void)!::write(err_.get(), &one, sizeof one);
}

}  // namespace capsule::vsock
