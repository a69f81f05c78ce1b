// VsockStreamLink: virtio-vsock packets carried on a byte stream instead of
// virtqueues. Each packet is its 44-byte header followed by exactly `len`
// payload bytes, back to back. A virtio-serial port is such a stream (QEMU's
// virtserialport chardev on the host, /dev/vportNpM in the guest), and it is
// emulated inside QEMU: it migrates and needs no shared guest RAM, which a
// copy-on-write clone cannot give a vhost-user back end. Both ends run the
// same VsockMuxer over this link; the link only frames packets, applies
// back-pressure and reports a broken stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/common/logging.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/vsock_muxer.h"

namespace capsule::vsock {

// Bytes of framed packets queued for the stream before the link stops
// asking the muxer for more (the stream's own buffers hold the rest).
inline constexpr size_t kStreamLinkMaxQueued = 256 * 1024;

class VsockStreamLink;
using VsockStreamLinkPtr = std::unique_ptr<VsockStreamLink>;

class VsockStreamLink {
 public:
  // Runs on the loop once, when the stream ends (EOF, error, or a frame no
  // peer of ours would send); the muxer's connections are gone by then.
  using LostFn = std::function<void(const Status& why)>;

  // `stream` is made non-blocking and watched on `loop`.
  static Result<VsockStreamLinkPtr> Start(EventLoop& loop, UniqueFd stream, VsockMuxer::Options options,
                                          LostFn on_lost);
  ~VsockStreamLink();
  VsockStreamLink(const VsockStreamLink&) = delete;
  VsockStreamLink& operator=(const VsockStreamLink&) = delete;

  VsockMuxer& muxer() { return muxer_; }
  bool lost() const { return lost_; }
  // Bytes read from the stream so far.
  uint64_t bytes_in() const { return bytes_in_; }

 private:
  VsockStreamLink(EventLoop& loop, UniqueFd stream, VsockMuxer::Options options, LostFn on_lost);
  void OnEvents(uint32_t events);
  // Frames every whole packet of the input; false when the stream broke.
  bool DrainInput();
  void Pump();
  void SchedulePump();
  bool Flush();
  void UpdateInterest();
  void Lose(const Status& why);

  EventLoop& loop_;
  UniqueFd fd_;
  VsockMuxer muxer_;
  LostFn on_lost_;
  std::unique_ptr<uint8_t[]> scratch_;  // one frame, filled by the muxer
  std::unique_ptr<uint8_t[]> in_;       // unparsed input: [in_begin_, in_end_)
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  std::vector<uint8_t> out_;
  size_t out_head_ = 0;
  uint32_t interest_ = 0;
  bool pump_scheduled_ = false;
  EventLoop::TimerId pump_timer_ = 0;
  bool lost_ = false;
  uint64_t bytes_in_ = 0;
  log::Logger log_{"vsock-link"};
};

}  // namespace capsule::vsock
