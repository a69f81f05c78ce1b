// VhostUserChannel: message framing on the front end's unix socket. Reads
// never cross a message boundary, so the SCM_RIGHTS fds received while a
// message is being read belong to that message and no other.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/vsock/vhost_user_protocol.h"

namespace capsule::vsock {

class VhostUserChannel {
 public:
  // `fd` is a connected, non-blocking unix stream socket.
  explicit VhostUserChannel(UniqueFd fd) : fd_(std::move(fd)) {}

  int fd() const { return fd_.get(); }
  // Whether the peer ever sent a byte (a liveness probe sends none).
  bool received_any() const { return received_any_; }

  // Reads what the socket holds, appending the messages completed (maybe
  // none) to `out` even when it then fails. UNAVAILABLE when the front end
  // closed the socket; INVALID_ARGUMENT for a header no valid front end
  // sends (the stream cannot resync after it).
  Status ReadAvailable(std::vector<vhost_user::Message>* out);

  // Sends a reply to `request` (reply flag set) with `payload`.
  Status Reply(uint32_t request, const std::vector<uint8_t>& payload);

 private:
  // Reads up to `len` bytes into `dst`, collecting fds: bytes read, 0 on EAGAIN.
  Result<size_t> Recv(uint8_t* dst, size_t len);

  UniqueFd fd_;
  uint8_t hdr_raw_[vhost_user::kHeaderSize] = {};
  size_t hdr_have_ = 0;
  bool in_payload_ = false;
  vhost_user::Message current_;
  size_t payload_have_ = 0;
  bool received_any_ = false;
};

}  // namespace capsule::vsock
