// Framing and flow control for virtio-vsock over a byte stream. Input is
// read only while the muxer can take packets (its reply queue not full), and
// packets are pulled from the muxer only while fewer than
// kStreamLinkMaxQueued bytes wait for the stream, so a slow peer holds back
// our sockets through vsock credit rather than through our memory.
#include "runtime/vsock/stream_link.h"

#include "runtime/common/file_util.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fmt/format.h>

namespace capsule::vsock {
namespace {

constexpr size_t kMaxFrame = kPacketHeaderSize + kMaxPacketPayload;
// Unparsed input kept at most: one whole frame and the start of the next.
constexpr size_t kMaxBufferedInput = 2 * kMaxFrame;
// Reads per wake-up, so one busy direction does not starve the other.
constexpr int kReadsPerEvent = 8;

}  // namespace

VsockStreamLink::VsockStreamLink(EventLoop& loop, UniqueFd stream, VsockMuxer::Options options, LostFn on_lost)
    : loop_(loop),
      fd_(std::move(stream)),
      muxer_(loop, std::move(options), [this] { SchedulePump(); }),
      on_lost_(std::move(on_lost)),
      scratch_(std::make_unique_for_overwrite<uint8_t[]>(kMaxFrame)),
      in_(std::make_unique_for_overwrite<uint8_t[]>(kMaxBufferedInput)) {}

Result<VsockStreamLinkPtr> VsockStreamLink::Start(EventLoop& loop, UniqueFd stream, VsockMuxer::Options options,
                                                  LostFn on_lost) {
  if (!stream) return InvalidArgument("vsock link: no stream");
  RETURN_IF_ERROR_CTX(SetNonBlocking(stream.get()), "vsock link: the stream");
  VsockStreamLinkPtr link(new VsockStreamLink(loop, std::move(stream), std::move(options), std::move(on_lost)));
  VsockStreamLink* self = link.get();
  link->interest_ = EPOLLIN;
  RETURN_IF_ERROR(loop.Add(link->fd_.get(), link->interest_, [self](uint32_t ev) { self->OnEvents(ev); }));
  // The stream being open is all a link knows of its peer: a request
  // before the peer reads is held in the stream and answered late, or
  // times out like any unanswered vsock connect.
  link->muxer_.set_guest_ready(true);
  return link;
}

VsockStreamLink::~VsockStreamLink() {
  if (fd_) loop_.Remove(fd_.get());
  if (pump_scheduled_) loop_.CancelTimer(pump_timer_);
}

void VsockStreamLink::OnEvents(uint32_t events) {
  if (lost_) return;
  if (events & EPOLLOUT) {
    if (!Flush()) return;
    Pump();
    if (lost_) return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    for (int i = 0; i < kReadsPerEvent && !muxer_.replies_full(); ++i) {
      if (in_end_ == kMaxBufferedInput && in_begin_ > 0) {
        std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
        in_end_ -= in_begin_;
        in_begin_ = 0;
      }
      if (in_end_ == kMaxBufferedInput) break;  // a whole frame is waiting for the muxer
      ssize_t n = ::read(fd_.get(), in_.get() + in_end_, kMaxBufferedInput - in_end_);
      if (n > 0) {
        in_end_ += static_cast<size_t>(n);
        bytes_in_ += static_cast<uint64_t>(n);
      }
      if (n == 0) return Lose(Unavailable("the peer closed the vsock link"));
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return Lose(ErrnoStatus("read from the vsock link"));
      }
      if (!DrainInput()) return;
    }
  }
  Pump();
}

bool VsockStreamLink::DrainInput() {
  while (!muxer_.replies_full()) {
    size_t avail = in_end_ - in_begin_;
    if (avail < kPacketHeaderSize) break;
    const uint8_t* p = in_.get() + in_begin_;
    PacketHeader h = DecodeHeader(p);
    if (h.len > kMaxPacketPayload) {
      Lose(InvalidArgument(fmt::format("vsock link: a packet of {} payload bytes (at most {}): the stream is not "
                                       "carrying vsock packets", h.len, kMaxPacketPayload)));
      return false;
    }
    size_t frame = kPacketHeaderSize + h.len;
    if (avail < frame) break;
    DescChain chain;
    chain.readable.push_back(iovec{const_cast<uint8_t*>(p), frame});
    chain.readable_len = frame;
    Result<TxPacket> pkt = ParseTxPacket(chain);
    if (pkt.ok()) {
      log_.Trace("in: {}", pkt->hdr.ToString());
      muxer_.OnGuestPacket(*pkt);
    } else {
      log_.Warn("dropping a malformed packet: {}", pkt.status().message());
    }
    in_begin_ += frame;
  }
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  return true;
}

void VsockStreamLink::SchedulePump() {
  if (pump_scheduled_ || lost_) return;
  pump_scheduled_ = true;
  pump_timer_ = loop_.AddTimer(EventLoop::Clock::now(), [this] {
    pump_scheduled_ = false;
    Pump();
  });
}

void VsockStreamLink::Pump() {
  if (lost_) return;
  DescChain chain;
  chain.writable.push_back(iovec{scratch_.get(), kMaxFrame});
  chain.writable_len = kMaxFrame;
  while (out_.size() - out_head_ < kStreamLinkMaxQueued && muxer_.WantsRx()) {
    uint32_t n = muxer_.FillRx(chain);
    if (n == 0) break;
    out_.insert(out_.end(), scratch_.get(), scratch_.get() + n);
  }
  if (!Flush()) return;
  // Sending drained the replies that paused input: take what is buffered.
  if (!muxer_.replies_full() && in_end_ - in_begin_ >= kPacketHeaderSize) {
    if (!DrainInput()) return;
    if (muxer_.WantsRx()) SchedulePump();
  }
  UpdateInterest();
}

bool VsockStreamLink::Flush() {
  while (out_head_ < out_.size()) {
    ssize_t n = ::write(fd_.get(), out_.data() + out_head_, out_.size() - out_head_);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      Lose(ErrnoStatus("write to the vsock link"));
      return false;
    }
    out_head_ += static_cast<size_t>(n);
  }
  if (out_head_ == out_.size()) {
    out_.clear();
    out_head_ = 0;
  } else if (out_head_ >= kStreamLinkMaxQueued) {
    out_.erase(out_.begin(), out_.begin() + static_cast<std::ptrdiff_t>(out_head_));
    out_head_ = 0;
  }
  UpdateInterest();
  return true;
}

void VsockStreamLink::UpdateInterest() {
  if (lost_) return;
  uint32_t want = (muxer_.replies_full() ? 0u : static_cast<uint32_t>(EPOLLIN)) |
                  (out_head_ < out_.size() ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  if (want == interest_) return;
  Status s = loop_.Modify(fd_.get(), want);
  if (!s.ok()) return Lose(s);
  interest_ = want;
}

void VsockStreamLink::Lose(const Status& why) {
  if (lost_) return;
  lost_ = true;
  log_.Info("vsock link lost: {} ({} connections closed)", why.message(), muxer_.connection_count());
  loop_.Remove(fd_.get());
  fd_.reset();
  if (pump_scheduled_) loop_.CancelTimer(pump_timer_);
  pump_scheduled_ = false;
  muxer_.set_guest_ready(false);
  muxer_.Reset();
  // Posted: the owner may destroy the link from the callback.
  if (on_lost_) loop_.Post([cb = on_lost_, why] { cb(why); });
}

}  // namespace capsule::vsock
