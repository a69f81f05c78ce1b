// Connection: one vsock stream between a guest port and a host unix socket,
// as a state machine (connecting -> established -> closing -> closed) with
// virtio-vsock credit flow control in both directions:
//  - guest -> host: we advertise buf_alloc/fwd_cnt; bytes the host socket
//    cannot take yet wait in a ByteQueue bounded by buf_alloc, and a
//    CREDIT_UPDATE goes out when the guest's view of our space runs low;
//  - host -> guest: we read the host socket straight into rx buffers, never
//    more than the guest's advertised free space (peer_buf_alloc minus bytes
//    in flight); when that is zero we stop reading (back-pressure on the host
//    socket) and send one CREDIT_REQUEST.
// The muxer owns connections, routes packets to them and asks each in turn
// to fill an rx buffer; a connection never blocks and never touches queues.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/byte_queue.h"
#include "runtime/vsock/virtqueue.h"
#include "runtime/vsock/vsock_packet.h"

namespace capsule::vsock {

// Timeouts. A REQUEST unanswered this long fails the hybrid CONNECT (Linux
// gives a connect 2 s; TCG guests answer slower, hence more); a connection
// both sides shut down is reset after this long (Firecracker's 2 s; Linux
// waits 8 s for the same RST before resetting itself).
inline constexpr std::chrono::milliseconds kConnectTimeout{5000};
inline constexpr std::chrono::milliseconds kCloseTimeout{2000};

// Host side port first: the port on CID 2 (ours), then the guest's port.
struct ConnKey {
  uint32_t local_port = 0;
  uint32_t peer_port = 0;
  bool operator==(const ConnKey&) const = default;
};

struct ConnKeyHash {
  size_t operator()(const ConnKey& k) const {
    return std::hash<uint64_t>()((uint64_t{k.local_port} << 32) | k.peer_port);
  }
};

class Connection {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { kConnecting, kEstablished, kClosing, kClosed };
  static std::string_view StateName(State s);

  struct Params {
    uint64_t local_cid = kHostCid;
    uint64_t peer_cid = 0;
    ConnKey key;
    uint32_t buf_alloc = 0;  // our receive buffer, advertised to the guest
    std::chrono::milliseconds connect_timeout{0};
    std::chrono::milliseconds close_timeout{0};
  };

  // Host-initiated (hybrid CONNECT): a REQUEST goes to the guest, "OK <port>"
  // to the host once the guest answers RESPONSE.
  static std::unique_ptr<Connection> HostInitiated(const Params& p, UniqueFd host, Clock::time_point now);
  // Guest-initiated: `host` already connected to the host's listener; a
  // RESPONSE goes to the guest. `request` carries the guest's credit.
  static std::unique_ptr<Connection> GuestInitiated(const Params& p, UniqueFd host, const PacketHeader& request);

  const ConnKey& key() const { return p_.key; }
  State state() const { return state_; }
  int host_fd() const { return host_.get(); }

  // A packet from the guest (tx queue) for this connection.
  void OnGuestPacket(const TxPacket& pkt, Clock::time_point now);
  // epoll events on the host socket.
  void OnHostEvents(uint32_t events, Clock::time_point now);
  // The deadline passed (connect or close timeout).
  void OnDeadline(Clock::time_point now);
  // Closes at once without telling the guest (it no longer knows this
  // connection, e.g. after a driver reset).
  void Abort(std::string reason) { Close(false, std::move(reason)); }

  // Something to put on the rx queue?
  bool WantsRx() const;
  // Writes one packet into `chain`; returns the bytes used (0: nothing to
  // send after all, the chain is untouched).
  uint32_t FillRx(const DescChain& chain, Clock::time_point now);

  std::optional<Clock::time_point> deadline() const { return deadline_; }
  // Closed: the muxer removes it, first queueing an RST when rst_on_close().
  bool closed() const { return state_ == State::kClosed; }
  bool rst_on_close() const { return rst_on_close_; }
  const std::string& close_reason() const { return close_reason_; }

  // Flow-control counters, for tests and logs.
  uint32_t fwd_cnt() const { return fwd_cnt_; }
  uint32_t rx_cnt() const { return rx_cnt_; }
  uint32_t tx_cnt() const { return tx_cnt_; }
  uint32_t PeerFree() const;
  size_t buffered_to_host() const { return to_host_.size(); }

 private:
  Connection(const Params& p, UniqueFd host, State initial);
  void MoveTo(State next);
  void Close(bool send_rst, std::string reason);
  PacketHeader Header(Op op) const;
  uint32_t Emit(const DescChain& chain, PacketHeader h);
  uint32_t FillData(const DescChain& chain);
  uint32_t DesiredShutdown() const;
  void OnPeerShutdown(uint32_t flags, Clock::time_point now);
  void ApplyPeerShutdown();
  void WriteToHost(const std::vector<iovec>& payload);
  void FlushToHost();
  void NoteForwarded(size_t guest_bytes);
  void StartClosing(Clock::time_point now);

  Params p_;
  UniqueFd host_;
  State state_;
  log::Logger log_{"vsock-conn"};

  // Guest-bound work.
  bool send_request_ = false;
  bool send_response_ = false;
  bool credit_update_ = false;
  bool credit_request_ = false;
  bool credit_request_sent_ = false;  // one per stall
  uint32_t shutdown_sent_ = 0;        // flags already told to the guest

  // Host socket state.
  bool host_readable_ = false;
  bool host_eof_ = false;   // host shut down writing (read returned 0)
  bool host_gone_ = false;  // host cannot receive (hang-up or EPIPE)
  bool host_wr_shut_ = false;
  bool host_rd_shut_ = false;

  // Guest's announced state.
  uint32_t peer_shutdown_ = 0;
  uint32_t peer_buf_alloc_ = 0;
  uint32_t peer_fwd_cnt_ = 0;

  // Counters (u32, wrapping, as in linux/virtio_vsock.h).
  uint32_t tx_cnt_ = 0;             // payload bytes sent to the guest
  uint32_t rx_cnt_ = 0;             // payload bytes received from the guest
  uint32_t fwd_cnt_ = 0;            // of those, bytes written to the host
  uint32_t last_fwd_cnt_sent_ = 0;  // fwd_cnt the guest last heard

  ByteQueue to_host_;
  size_t preamble_left_ = 0;  // front bytes of to_host_ that are "OK <port>\n", not guest data

  std::optional<Clock::time_point> deadline_;
  bool rst_on_close_ = false;
  std::string close_reason_;
};

using ConnectionPtr = std::unique_ptr<Connection>;


}  // namespace capsule::vsock
