// Connection table, routing and rx scheduling for the unix back end.
// After anything touches a connection, Sync() reconciles the table with it:
// remove it once closed (queueing its RST), put it on the rx round-robin
// when it has something for the guest, and (re)arm its deadline timer.
#include "runtime/vsock/vsock_muxer.h"

#include <fmt/format.h>
#include <sys/epoll.h>

#include "runtime/common/unix_stream.h"
#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock {

VsockMuxer::VsockMuxer(EventLoop& loop, Options options, std::function<void()> wants_rx)
    : loop_(loop), opts_(std::move(options)), wants_rx_(std::move(wants_rx)) {}

VsockMuxer::~VsockMuxer() { Reset(); }

const Connection* VsockMuxer::Find(const ConnKey& key) const {
  auto it = conns_.find(key);
  return it == conns_.end() ? nullptr : it->second.conn.get();
}

void VsockMuxer::Reset() {
  while (!conns_.empty()) {
    auto it = conns_.begin();
    loop_.Remove(it->second.conn->host_fd());
    if (it->second.timer != 0) loop_.CancelTimer(it->second.timer);
    conns_.erase(it);
  }
  local_ports_.clear();
  rx_order_.clear();
  replies_.clear();
}

Status VsockMuxer::Register(ConnectionPtr conn) {
  ConnKey key = conn->key();
  int fd = conn->host_fd();
  // Edge-triggered: the connection keeps its own readable flag, so a stream
  // it cannot forward (no guest credit) does not wake the loop again.
  RETURN_IF_ERROR(loop_.Add(fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                            [this, key](uint32_t ev) { OnHostEvents(key, ev); }));
  local_ports_.insert(key.local_port);
  conns_[key].conn = std::move(conn);
  Sync(key);
  return Status::Ok();
}

void VsockMuxer::Remove(std::unordered_map<ConnKey, Entry, ConnKeyHash>::iterator it) {
  Connection& c = *it->second.conn;
  const ConnKey key = c.key();
  loop_.Remove(c.host_fd());
  if (it->second.timer != 0) loop_.CancelTimer(it->second.timer);
  if (c.rst_on_close()) {
    PacketHeader to;  // shaped like a packet from the guest, so QueueRst can answer it
    to.src_cid = opts_.peer_cid;
    to.dst_cid = opts_.local_cid;
    to.src_port = key.peer_port;
    to.dst_port = key.local_port;
    QueueRst(to);
  }
  log_.Info("connection host:{} <-> guest:{} closed: {} (rx {} B, tx {} B)", key.local_port, key.peer_port,
            c.close_reason(), c.rx_cnt(), c.tx_cnt());
  local_ports_.erase(local_ports_.find(key.local_port));
  conns_.erase(it);
}

void VsockMuxer::Sync(const ConnKey& key) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  Entry& e = it->second;
  if (e.conn->closed()) return Remove(it);
  if (!e.queued && e.conn->WantsRx()) {
    rx_order_.push_back(key);
    e.queued = true;
  }
  std::optional<Connection::Clock::time_point> d = e.conn->deadline();
  if (d != e.timer_at) {
    if (e.timer != 0) loop_.CancelTimer(e.timer);
    e.timer = d ? loop_.AddTimer(*d, [this, key] { OnTimer(key); }) : 0;
    e.timer_at = d;
  }
}

void VsockMuxer::OnHostEvents(const ConnKey& key, uint32_t events) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  it->second.conn->OnHostEvents(events, Connection::Clock::now());
  Sync(key);
  if (WantsRx()) wants_rx_();
}

void VsockMuxer::OnTimer(const ConnKey& key) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  it->second.timer = 0;
  it->second.timer_at.reset();
  it->second.conn->OnDeadline(Connection::Clock::now());
  Sync(key);
  if (WantsRx()) wants_rx_();
}

void VsockMuxer::QueueRst(const PacketHeader& to) {
  PacketHeader rst;
  rst.src_cid = opts_.local_cid;
  rst.dst_cid = to.src_cid;
  rst.src_port = to.dst_port;
  rst.dst_port = to.src_port;
  rst.type = to.type;
  rst.op = static_cast<uint16_t>(Op::kRst);
  replies_.push_back(rst);
}

void VsockMuxer::OnGuestPacket(const TxPacket& pkt) {
  const PacketHeader& h = pkt.hdr;
  if (h.src_cid != opts_.peer_cid || h.dst_cid != opts_.local_cid) {
    // Only the one peer talks to us here; anything else is spoofed or misrouted.
    log_.Debug("dropping {}: not from cid {} to cid {}", h.ToString(), opts_.peer_cid, opts_.local_cid);
    return;
  }
  ConnKey key{h.dst_port, h.src_port};
  auto it = conns_.find(key);
  if (h.type == kTypeStream && h.operation() == Op::kRequest && it != conns_.end()) {
    // Linux never reuses the ports of a connection it still has; one that
    // does has forgotten the old connection (guest reset): replace it.
    it->second.conn->Abort("guest reused its ports for a new connection (guest reset?)");
    Remove(it);
    it = conns_.end();
  }
  if (h.type != kTypeStream || it == conns_.end()) {
    if (h.type == kTypeStream && h.operation() == Op::kRequest) return HandleGuestConnect(h);
    if (h.operation() != Op::kRst) {  // never answer an RST with one
      log_.Debug("RST for {}: no such connection", h.ToString());
      QueueRst(h);
    }
    return;
  }
  it->second.conn->OnGuestPacket(pkt, Connection::Clock::now());
  Sync(key);
}

void VsockMuxer::HandleGuestConnect(const PacketHeader& req) {
  std::string path = fmt::format("{}_{}", opts_.uds_path, req.dst_port);
  Result<UniqueFd> fd = ConnectUnix(path, {.nonblocking = true});
  if (!fd.ok()) {
    log_.Info("guest port {} -> host port {}: {}; sending RST", req.src_port, req.dst_port, fd.status().message());
    return QueueRst(req);
  }
  Connection::Params p = ParamsFor(ConnKey{req.dst_port, req.src_port});
  Status s = Register(Connection::GuestInitiated(p, std::move(*fd), req));
  if (!s.ok()) {
    log_.Warn("guest port {} -> {}: {}", req.src_port, path, s.ToString());
    return QueueRst(req);
  }
  log_.Info("guest port {} connected to {}", req.src_port, path);
}

std::optional<uint32_t> VsockMuxer::AllocatePort(uint32_t guest_port) {
  // Each try moves on, so a busy port is skipped; the range holds 3 * 2^30.
  for (uint32_t tries = 0; tries < 65536; ++tries) {
    uint32_t p = next_port_;
    next_port_ = next_port_ >= 0xfffffffeu ? kFirstLocalPort : next_port_ + 1;
    if (local_ports_.count(p) == 0 && conns_.count(ConnKey{p, guest_port}) == 0) return p;
  }
  return std::nullopt;
}

void VsockMuxer::ConnectToGuest(UniqueFd host, uint32_t guest_port) {
  if (!guest_ready_) {
    log_.Info("CONNECT {} refused: the guest's vsock driver is not running", guest_port);
    return;  // closing `host` tells the dialer
  }
  std::optional<uint32_t> port = AllocatePort(guest_port);
  if (!port) {
    log_.Warn("CONNECT {} refused: no free host port", guest_port);
    return;
  }
  Connection::Params p = ParamsFor(ConnKey{*port, guest_port});
  Status s = Register(Connection::HostInitiated(p, std::move(host), Connection::Clock::now()));
  if (!s.ok()) {
    log_.Warn("CONNECT {}: {}", guest_port, s.ToString());
    return;
  }
  log_.Debug("CONNECT {}: host port {}, REQUEST queued", guest_port, *port);
  if (WantsRx()) wants_rx_();
}

uint32_t VsockMuxer::FillRx(const DescChain& chain) {
  if (chain.writable_len < kPacketHeaderSize) return 0;
  if (!replies_.empty()) {
    WriteRxHeader(chain, replies_.front());
    replies_.pop_front();
    return static_cast<uint32_t>(kPacketHeaderSize);
  }
  auto now = Connection::Clock::now();
  for (size_t tries = rx_order_.size(); tries > 0 && !rx_order_.empty(); --tries) {
    ConnKey key = rx_order_.front();
    rx_order_.pop_front();
    auto it = conns_.find(key);
    if (it == conns_.end()) continue;  // removed since it was queued
    it->second.queued = false;
    uint32_t n = it->second.conn->FillRx(chain, now);
    Sync(key);  // back of the line if it has more
    if (n > 0) return n;
    // A close decided while filling (read error) queues an RST instead.
    if (!replies_.empty()) return FillRx(chain);
  }
  return 0;
}

}  // namespace capsule::vsock
