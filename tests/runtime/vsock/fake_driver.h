// FakeDriver: QEMU and the guest's virtio-vsock driver in one test object.
// It speaks vhost-user to a back end the way QEMU 7.2's vhost-user-vsock
// does (realize, start, stop), shares guest RAM as a memfd, lays out the
// rx/tx split rings itself and moves packets through them like Linux's
// driver: rx buffers of header + 4 KiB, tx chains of header + payload,
// kicks and interrupts through eventfds (honouring EVENT_IDX when acked).
// Interrupt waits are strict: a missed notification fails the test.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/vhost_user_protocol.h"
#include "runtime/vsock/vsock_packet.h"

namespace capsule::vsock::testing {

inline constexpr std::chrono::milliseconds kWait{5000};

struct RxPacket {
  PacketHeader hdr;
  std::string payload;
  uint32_t used_len = 0;
};

class FakeDriver {
 public:
  struct Options {
    size_t mem_size = 8 << 20;
    uint64_t gpa_base = 0x100000;          // guest-physical address of the RAM region
    uint64_t uva_base = 0x7f1234560000;    // "QEMU's" address of the same region
    uint16_t queue_size = 128;             // QEMU's VHOST_VSOCK_QUEUE_SIZE
    bool event_idx = true;                 // ack VIRTIO_RING_F_EVENT_IDX when offered
    uint32_t rx_buf_size = 4096;           // payload bytes per rx buffer (Linux: 4 KiB)
    bool rx_split_header = true;           // header and payload in two descriptors (Linux 6.1)
    bool auto_repost_rx = true;            // give each received buffer straight back
  };

  static Result<std::unique_ptr<FakeDriver>> Connect(const std::string& socket_path, Options options);
  static Result<std::unique_ptr<FakeDriver>> Connect(const std::string& socket_path) {
    return Connect(socket_path, Options{});
  }
  ~FakeDriver();

  // ---- vhost-user, QEMU's side ----
  Status Send(uint32_t request, const std::vector<uint8_t>& payload, const std::vector<int>& fds = {},
              uint32_t extra_flags = 0);
  Status SendBytes(const std::vector<uint8_t>& raw);
  Result<vhost_user::Message> Recv(std::chrono::milliseconds timeout = kWait);
  Result<uint64_t> GetU64(vhost_user::Request r);
  // Sends with NEED_REPLY; returns the back end's ack (0 = success).
  Result<uint64_t> SendAcked(vhost_user::Request r, const std::vector<uint8_t>& payload,
                             const std::vector<int>& fds = {});
  Result<std::vector<uint8_t>> GetConfig(uint32_t offset, uint32_t size);
  // True once the back end closed the vhost-user socket.
  bool WaitPeerClosed(std::chrono::milliseconds timeout = kWait);
  void Disconnect() { sock_.reset(); }

  // QEMU 7.2 sequences.
  Status Realize();
  Status Start();
  Result<uint16_t> GetVringBase(uint32_t index);
  // vhost_dev_start again after a stop (VM resumed): same rings, saved bases.
  Status Resume();
  // The guest rebooted: fresh rings from index 0, all rx buffers reposted.
  Status ResetAndStart();

  uint64_t offered_features() const { return offered_; }
  uint64_t acked_features() const { return acked_; }
  uint64_t protocol_features() const { return protocol_; }

  // ---- guest driver ----
  void PostRxBuffers();
  Status SendPacket(const PacketHeader& h, std::string_view payload = {});
  Result<RxPacket> Receive(std::chrono::milliseconds timeout = kWait);
  // Receive, failing unless nothing arrives (checked against a later marker
  // the caller sends, so no sleeping is needed).
  bool RxPending();
  size_t ReclaimTx();
  // Waits until the device has returned every tx chain published so far.
  Status WaitTxDrained(std::chrono::milliseconds timeout = kWait);

  // Raw access for malformed-input tests.
  struct Desc {
    Desc(uint64_t g, uint32_t l, uint16_t f = 0, std::optional<uint16_t> n = std::nullopt)
        : gpa(g), len(l), flags(f), next(n) {}
    uint64_t gpa = 0;
    uint32_t len = 0;
    uint16_t flags = 0;
    std::optional<uint16_t> next;  // default: the following descriptor of the chain
    bool loop_to_head = false;     // next = the chain's first descriptor (a cycle)
  };
  uint64_t AllocTx(size_t bytes);
  uint8_t* Host(uint64_t gpa);
  uint64_t mem_end_gpa() const { return opt_.gpa_base + opt_.mem_size; }
  // Writes `descs` into free tx descriptors, chains and publishes them.
  void PublishTxChain(const std::vector<Desc>& descs);
  // Publishes a head index as-is (may be out of range).
  void PublishTxHead(uint16_t head);
  // Moves the tx avail index by `delta` without adding entries.
  void BumpTxAvailIdx(uint16_t delta);
  uint16_t tx_used_idx() const;
  uint16_t rx_avail_idx() const;

 private:
  struct Ring {
    uint64_t desc = 0, avail = 0, used = 0;  // offsets in the region
    UniqueFd kick, call, err;
    uint16_t avail_idx = 0;      // driver's next avail index
    uint16_t last_used = 0;      // driver's consumed used index
    uint16_t base = 0;           // from GET_VRING_BASE
  };
  explicit FakeDriver(Options o) : opt_(o) {}
  Status SetupMemory();
  Status SetupRing(uint32_t index, Ring& r, bool resume);
  void WriteDesc(Ring& r, uint16_t i, uint64_t gpa, uint32_t len, uint16_t flags, uint16_t next);
  void PublishAvail(Ring& r, uint16_t head);
  void Kick(Ring& r, uint16_t old_idx);
  bool WaitCall(Ring& r, std::chrono::steady_clock::time_point deadline);
  uint16_t UsedIdx(const Ring& r) const;
  uint8_t* At(uint64_t off) { return mem_ + off; }

  Options opt_;
  UniqueFd sock_;
  UniqueFd memfd_;
  uint8_t* mem_ = nullptr;
  uint64_t offered_ = 0, acked_ = 0, protocol_ = 0;
  Ring rx_, tx_;
  uint64_t rx_bufs_ = 0;        // offset of the rx buffer area
  uint32_t rx_stride_ = 0;
  std::vector<bool> rx_posted_;  // per rx buffer
  uint64_t tx_area_ = 0, tx_next_ = 0;
  std::vector<uint16_t> tx_free_;                     // free descriptor indices
  std::map<uint16_t, std::vector<uint16_t>> tx_chains_;  // head -> its descriptors
  UniqueFd masked_call_[2];  // QEMU's "masked notifier" sent at realize
};

// Header of a packet from the guest (CID `cid`) to the host.
PacketHeader GuestPacket(uint64_t cid, Op op, uint32_t src_port, uint32_t dst_port, uint32_t buf_alloc = 256 * 1024,
                         uint32_t fwd_cnt = 0);

}  // namespace capsule::vsock::testing
