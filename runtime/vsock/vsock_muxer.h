// VsockMuxer: the unix-socket back end of the vsock device. It owns every
// connection, routes guest packets to them by (host port, guest port),
// answers packets for unknown connections with RST, connects guest requests
// for host port P to the unix socket "<uds_path>_P" (Firecracker's
// convention), allocates host ports for hybrid CONNECTs, watches host
// sockets on the event loop and hands out rx work round-robin, one packet
// per connection per turn, so one slow stream never holds up the others.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/virtqueue.h"
#include "runtime/vsock/vsock_connection.h"
#include "runtime/vsock/vsock_packet.h"

namespace capsule::vsock {

// Our receive buffer per connection (Linux's default vsock buffer size).
inline constexpr uint32_t kDefaultBufAlloc = 256 * 1024;
// Host ports for hybrid CONNECTs come from here up (Firecracker's range),
// far above the ports guests dial on the host.
inline constexpr uint32_t kFirstLocalPort = 1u << 30;
// Past this many control replies waiting for rx buffers, the device stops
// taking tx packets until the guest posts rx buffers again (vhost-vsock's
// queued_replies limit, scaled to our queue).
inline constexpr size_t kMaxPendingReplies = 256;

class VsockMuxer {
 public:
  // The muxer is written from the host's side ("guest" is the far end),
  // but runs on either: the guest's agent runs one over a virtio-serial
  // link with the roles swapped (local_cid = the guest's CID, peer_cid = 2).
  struct Options {
    uint64_t peer_cid = 3;
    std::string uds_path;  // hybrid socket; guest->host port P dials uds_path + "_P"
    uint32_t buf_alloc = kDefaultBufAlloc;
    std::chrono::milliseconds connect_timeout = kConnectTimeout;
    std::chrono::milliseconds close_timeout = kCloseTimeout;
    uint64_t local_cid = kHostCid;
  };

  // `wants_rx` runs (on the loop) when host activity gave the guest
  // something to receive; the device then drains rx.
  VsockMuxer(EventLoop& loop, Options options, std::function<void()> wants_rx);
  ~VsockMuxer();
  VsockMuxer(const VsockMuxer&) = delete;
  VsockMuxer& operator=(const VsockMuxer&) = delete;

  // Whether the guest's driver has its queues up; CONNECTs fail fast if not.
  void set_guest_ready(bool ready) { guest_ready_ = ready; }
  bool guest_ready() const { return guest_ready_; }

  // A packet from the guest's tx queue.
  void OnGuestPacket(const TxPacket& pkt);
  // A host client completed "CONNECT <port>\n" on the hybrid socket.
  void ConnectToGuest(UniqueFd host, uint32_t guest_port);

  bool WantsRx() const { return !replies_.empty() || !rx_order_.empty(); }
  // Writes the next packet for the guest into `chain`: bytes used, 0 if
  // there was nothing to send.
  uint32_t FillRx(const DescChain& chain);
  bool replies_full() const { return replies_.size() >= kMaxPendingReplies; }

  // Drops every connection (host sockets close) and pending reply.
  void Reset();

  size_t connection_count() const { return conns_.size(); }
  const Connection* Find(const ConnKey& key) const;
  const Options& options() const { return opts_; }

 private:
  struct Entry {
    ConnectionPtr conn;
    bool queued = false;  // in rx_order_
    std::optional<Connection::Clock::time_point> timer_at;
    EventLoop::TimerId timer = 0;
  };

  Status Register(ConnectionPtr conn);
  void Sync(const ConnKey& key);
  void Remove(std::unordered_map<ConnKey, Entry, ConnKeyHash>::iterator it);
  void OnHostEvents(const ConnKey& key, uint32_t events);
  void OnTimer(const ConnKey& key);
  void HandleGuestConnect(const PacketHeader& req);
  void QueueRst(const PacketHeader& to);
  std::optional<uint32_t> AllocatePort(uint32_t guest_port);
  Connection::Params ParamsFor(const ConnKey& key) const {
    return {opts_.local_cid, opts_.peer_cid, key, opts_.buf_alloc, opts_.connect_timeout, opts_.close_timeout};
  }

  EventLoop& loop_;
  Options opts_;
  std::function<void()> wants_rx_;
  bool guest_ready_ = false;
  std::unordered_map<ConnKey, Entry, ConnKeyHash> conns_;
  std::multiset<uint32_t> local_ports_;  // host ports in use
  uint32_t next_port_ = kFirstLocalPort;
  std::deque<ConnKey> rx_order_;         // connections with rx work, round-robin
  std::deque<PacketHeader> replies_;     // RSTs for packets without a connection
  log::Logger log_{"vsock"};
};

}  // namespace capsule::vsock
