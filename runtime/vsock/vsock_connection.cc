// The per-stream state machine. Data moves without intermediate copies when
// the host keeps up: guest payload is written from guest memory straight to
// the host socket, host data is read straight into the guest's rx buffer.
#include "runtime/vsock/vsock_connection.h"

#include <fmt/format.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock {

std::string_view Connection::StateName(State s) {
  switch (s) {
    case State::kConnecting: return "connecting";
    case State::kEstablished: return "established";
    case State::kClosing: return "closing";
    case State::kClosed: return "closed";
  }
  return "unknown";
}

Connection::Connection(const Params& p, UniqueFd host, State initial)
    : p_(p), host_(std::move(host)), state_(initial) {}

std::unique_ptr<Connection> Connection::HostInitiated(const Params& p, UniqueFd host, Clock::time_point now) {
  std::unique_ptr<Connection> c(new Connection(p, std::move(host), State::kConnecting));
  c->send_request_ = true;
  c->deadline_ = now + p.connect_timeout;
  return c;
}

std::unique_ptr<Connection> Connection::GuestInitiated(const Params& p, UniqueFd host, const PacketHeader& request) {
  std::unique_ptr<Connection> c(new Connection(p, std::move(host), State::kEstablished));
  c->send_response_ = true;
  c->peer_buf_alloc_ = request.buf_alloc;
  c->peer_fwd_cnt_ = request.fwd_cnt;
  return c;
}

void Connection::MoveTo(State next) {
  bool legal = (state_ == State::kConnecting && (next == State::kEstablished || next == State::kClosed)) ||
               (state_ == State::kEstablished && (next == State::kClosing || next == State::kClosed)) ||
               (state_ == State::kClosing && next == State::kClosed);
  if (!legal) {
    log_.Error("connection {}<->{}: cannot move from {} to {}", p_.key.local_port, p_.key.peer_port,
               StateName(state_), StateName(next));
    return;
  }
  state_ = next;
}

void Connection::Close(bool send_rst, std::string reason) {
  if (closed()) return;
  MoveTo(State::kClosed);
  rst_on_close_ = send_rst;
  close_reason_ = std::move(reason);
  deadline_.reset();
}

void Connection::StartClosing(Clock::time_point now) {
  if (state_ != State::kEstablished) return;
  MoveTo(State::kClosing);
  deadline_ = now + p_.close_timeout;
}

uint32_t Connection::PeerFree() const {
  uint32_t in_flight = tx_cnt_ - peer_fwd_cnt_;  // wraps like the guest's own counters
  return in_flight > peer_buf_alloc_ ? 0 : peer_buf_alloc_ - in_flight;
}

PacketHeader Connection::Header(Op op) const {
  PacketHeader h;
  h.src_cid = p_.local_cid;
  h.dst_cid = p_.peer_cid;
  h.src_port = p_.key.local_port;
  h.dst_port = p_.key.peer_port;
  h.type = kTypeStream;
  h.op = static_cast<uint16_t>(op);
  h.buf_alloc = p_.buf_alloc;
  h.fwd_cnt = fwd_cnt_;
  return h;
}

// ---- guest -> host ----

void Connection::OnGuestPacket(const TxPacket& pkt, Clock::time_point now) {
  if (closed()) return;
  const PacketHeader& h = pkt.hdr;
  peer_buf_alloc_ = h.buf_alloc;
  peer_fwd_cnt_ = h.fwd_cnt;
  if (PeerFree() > 0) credit_request_sent_ = false;
  if (state_ == State::kConnecting) {
    if (h.operation() == Op::kResponse) {
      MoveTo(State::kEstablished);
      deadline_.reset();
      std::string ok = fmt::format("OK {}\n", p_.key.local_port);
      to_host_.Append(ok);
      preamble_left_ = ok.size();
      FlushToHost();
    } else if (h.operation() == Op::kRst) {
      Close(false, fmt::format("guest refused connection to port {}", p_.key.peer_port));
    } else {
      Close(true, fmt::format("guest sent {} before RESPONSE", OpName(h.op)));
    }
    return;
  }
  switch (h.operation()) {
    case Op::kRw: {
      if (peer_shutdown_ & kShutdownSend) return Close(true, "guest sent data after shutting down sending");
      uint32_t buffered = rx_cnt_ - fwd_cnt_;
      if (h.len > p_.buf_alloc - std::min(buffered, p_.buf_alloc))
        return Close(true, fmt::format("guest overran its credit: {} bytes with {} buffered of {}", h.len, buffered,
                                       p_.buf_alloc));
      rx_cnt_ += h.len;
      if (host_gone_ || host_wr_shut_) {
        NoteForwarded(h.len);  // nobody can read it; keep credit flowing until the close completes
      } else {
        WriteToHost(pkt.payload);
      }
      return;
    }
    case Op::kCreditUpdate: return;  // credit already taken from the header
    case Op::kCreditRequest: credit_update_ = true; return;
    case Op::kShutdown: return OnPeerShutdown(h.flags & kShutdownBoth, now);
    case Op::kRst: return Close(false, "guest reset the connection");
    default:
      log_.Debug("ignoring {} on {} connection {}<->{}", OpName(h.op), StateName(state_), p_.key.local_port,
                 p_.key.peer_port);
  }
}

void Connection::WriteToHost(const std::vector<iovec>& payload) {
  if (payload.empty()) return;
  if (!to_host_.empty() || payload.size() > IOV_MAX) {
    to_host_.Append(payload);
    return FlushToHost();
  }
  size_t total = 0;
  for (const iovec& v : payload) total += v.iov_len;
  ssize_t n = WritevNoSignal(host_.get(), payload.data(), payload.size());
  if (n < 0) {
    host_gone_ = true;
    return Close(true, fmt::format("write to host socket: {}", std::strerror(static_cast<int>(-n))));
  }
  NoteForwarded(static_cast<size_t>(n));
  if (static_cast<size_t>(n) < total) to_host_.Append(SliceIovecs(payload, static_cast<size_t>(n), total - n));
}

void Connection::FlushToHost() {
  while (!to_host_.empty()) {
    iovec v{const_cast<uint8_t*>(to_host_.data()), to_host_.size()};
    ssize_t n = WritevNoSignal(host_.get(), &v, 1);
    if (n < 0) {
      host_gone_ = true;
      return Close(true, fmt::format("write to host socket: {}", std::strerror(static_cast<int>(-n))));
    }
    if (n == 0) return;  // full; EPOLLOUT resumes
    size_t pre = std::min(static_cast<size_t>(n), preamble_left_);
    preamble_left_ -= pre;
    to_host_.Consume(static_cast<size_t>(n));
    NoteForwarded(static_cast<size_t>(n) - pre);
  }
  ApplyPeerShutdown();
}

void Connection::NoteForwarded(size_t guest_bytes) {
  if (guest_bytes == 0) return;
  fwd_cnt_ += static_cast<uint32_t>(guest_bytes);
  // Tell the guest about freed space once its view of it drops below half.
  uint32_t unannounced_used = rx_cnt_ - last_fwd_cnt_sent_;
  uint32_t perceived_free = p_.buf_alloc - std::min(unannounced_used, p_.buf_alloc);
  if (state_ == State::kEstablished && perceived_free < p_.buf_alloc / 2) credit_update_ = true;
}

void Connection::OnPeerShutdown(uint32_t flags, Clock::time_point now) {
  peer_shutdown_ |= flags;
  if ((flags & kShutdownRcv) && !host_rd_shut_) {
    // Host writes now fail with EPIPE instead of piling up unread.
    ::shutdown(host_.get(), SHUT_RD);
    host_rd_shut_ = true;
  }
  if (peer_shutdown_ == kShutdownBoth) StartClosing(now);
  ApplyPeerShutdown();
}

void Connection::ApplyPeerShutdown() {
  if (closed() || !to_host_.empty()) return;  // deliver what the guest sent first
  if ((peer_shutdown_ & kShutdownSend) && !host_wr_shut_) {
    ::shutdown(host_.get(), SHUT_WR);
    host_wr_shut_ = true;
  }
  // Linux finishes its close when our RST arrives.
  if (peer_shutdown_ == kShutdownBoth) Close(true, "guest closed the connection");
}

// ---- host socket ----

void Connection::OnHostEvents(uint32_t events, Clock::time_point /*now*/) {
  if (closed()) return;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) host_readable_ = true;
  if (events & EPOLLHUP) host_gone_ = true;
  if (state_ == State::kConnecting) {
    if (host_gone_) Close(true, "host dialer hung up before the guest answered");
    return;
  }
  if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) FlushToHost();
}

void Connection::OnDeadline(Clock::time_point now) {
  if (closed() || !deadline_ || now < *deadline_) return;
  deadline_.reset();
  if (state_ == State::kConnecting) {
    Close(true, fmt::format("guest did not answer REQUEST for port {} within {} ms", p_.key.peer_port,
                            p_.connect_timeout.count()));
  } else {
    Close(true, fmt::format("close not acknowledged within {} ms", p_.close_timeout.count()));
  }
}

// ---- host -> guest ----

uint32_t Connection::DesiredShutdown() const {
  return (host_eof_ ? kShutdownSend : 0) | (host_gone_ ? kShutdownRcv : 0);
}

bool Connection::WantsRx() const {
  if (closed()) return false;
  if (send_request_ || send_response_ || credit_request_) return true;
  if (state_ == State::kConnecting) return false;
  bool data = state_ == State::kEstablished && host_readable_ && !host_eof_ && !(peer_shutdown_ & kShutdownRcv);
  if (data && (PeerFree() > 0 || !credit_request_sent_)) return true;
  if (DesiredShutdown() & ~shutdown_sent_) return true;
  return credit_update_ && state_ == State::kEstablished;
}

uint32_t Connection::Emit(const DescChain& chain, PacketHeader h) {
  WriteRxHeader(chain, h);
  last_fwd_cnt_sent_ = fwd_cnt_;
  credit_update_ = false;
  return static_cast<uint32_t>(kPacketHeaderSize) + h.len;
}

uint32_t Connection::FillData(const DescChain& chain) {
  uint32_t free = PeerFree();
  if (free == 0) {
    if (!credit_request_sent_) credit_request_ = true;
    return 0;
  }
  uint64_t room = std::min<uint64_t>({chain.writable_len - kPacketHeaderSize, kMaxPacketPayload, free});
  std::vector<iovec> iov = RxPayloadIovecs(chain, room);
  if (iov.empty()) return 0;
  if (iov.size() > IOV_MAX) iov.resize(IOV_MAX);
  ssize_t n;
  do {
    n = ::readv(host_.get(), iov.data(), static_cast<int>(iov.size()));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    PacketHeader h = Header(Op::kRw);
    h.len = static_cast<uint32_t>(n);
    tx_cnt_ += h.len;
    return Emit(chain, h);
  }
  host_readable_ = false;
  if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
    // EOF, or the socket failed (ECONNRESET): the host sends no more. If it
    // closed outright (not just shut down writing), say both at once rather
    // than waiting for the hang-up event to send a second SHUTDOWN.
    pollfd p{host_.get(), POLLOUT, 0};
    if (n < 0 || (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)))) host_gone_ = true;
    host_eof_ = true;
  }
  return 0;
}

uint32_t Connection::FillRx(const DescChain& chain, Clock::time_point now) {
  if (closed() || chain.writable_len < kPacketHeaderSize) return 0;
  if (send_request_) {
    send_request_ = false;
    return Emit(chain, Header(Op::kRequest));
  }
  if (send_response_) {
    send_response_ = false;
    return Emit(chain, Header(Op::kResponse));
  }
  if (state_ == State::kConnecting) return 0;
  if (state_ == State::kEstablished && host_readable_ && !host_eof_ && !(peer_shutdown_ & kShutdownRcv)) {
    if (uint32_t n = FillData(chain); n > 0) return n;
  }
  if (uint32_t want = DesiredShutdown(); want & ~shutdown_sent_) {
    shutdown_sent_ |= want;
    PacketHeader h = Header(Op::kShutdown);
    h.flags = shutdown_sent_;
    if (shutdown_sent_ == kShutdownBoth) StartClosing(now);
    return Emit(chain, h);
  }
  if (credit_update_ && state_ == State::kEstablished) return Emit(chain, Header(Op::kCreditUpdate));
  if (credit_request_) {
    credit_request_ = false;
    credit_request_sent_ = true;
    return Emit(chain, Header(Op::kCreditRequest));
  }
  return 0;
}

}  // namespace capsule::vsock
