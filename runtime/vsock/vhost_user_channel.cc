// recvmsg-based framing: header, then payload, each read for exactly the
// bytes still missing, with ancillary fds attached to the current message.
#include "runtime/vsock/vhost_user_channel.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "runtime/vsock/unix_socket.h"

namespace capsule::vsock {
namespace {

// Messages handled per readable event; the socket stays readable for more.
constexpr size_t kMaxMessagesPerRead = 32;
// Reply writes wait this long for room in the socket (QEMU reads promptly).
constexpr std::chrono::milliseconds kReplyTimeout{2000};

}  // namespace

Result<size_t> VhostUserChannel::Recv(uint8_t* dst, size_t len) {
  iovec iov{dst, len};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * vhost_user::kMaxMemRegions)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n;
  do {
    n = ::recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return ErrnoStatus("recvmsg from vhost-user front end");
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      current_.fds.emplace_back(fd);
    }
  }
  if (msg.msg_flags & MSG_CTRUNC)
    return InvalidArgument(fmt::format("vhost-user message carries more than {} fds", vhost_user::kMaxMemRegions));
  if (n == 0) return Unavailable("vhost-user front end closed the connection");
  received_any_ = true;
  return static_cast<size_t>(n);
}

Status VhostUserChannel::ReadAvailable(std::vector<vhost_user::Message>* out) {
  for (size_t done = 0; done < kMaxMessagesPerRead;) {
    if (!in_payload_) {
      ASSIGN_OR_RETURN(size_t n, Recv(hdr_raw_ + hdr_have_, vhost_user::kHeaderSize - hdr_have_));
      if (n == 0) break;
      hdr_have_ += n;
      if (hdr_have_ < vhost_user::kHeaderSize) continue;
      ASSIGN_OR_RETURN(current_.hdr, vhost_user::DecodeHeader(hdr_raw_, hdr_have_));
      current_.payload.assign(current_.hdr.size, 0);
      payload_have_ = 0;
      in_payload_ = true;
    }
    if (payload_have_ < current_.payload.size()) {
      ASSIGN_OR_RETURN(size_t n, Recv(current_.payload.data() + payload_have_, current_.payload.size() - payload_have_));
      if (n == 0) break;
      payload_have_ += n;
      if (payload_have_ < current_.payload.size()) continue;
    }
    out->push_back(std::move(current_));
    ++done;
    current_ = vhost_user::Message{};
    hdr_have_ = 0;
    in_payload_ = false;
  }
  return Status::Ok();
}

Status VhostUserChannel::Reply(uint32_t request, const std::vector<uint8_t>& payload) {
  vhost_user::Header h{request, vhost_user::kVersion | vhost_user::kReplyFlag, static_cast<uint32_t>(payload.size())};
  std::vector<uint8_t> head = vhost_user::EncodeHeader(h);
  iovec iov[2] = {{head.data(), head.size()}, {const_cast<uint8_t*>(payload.data()), payload.size()}};
  size_t total = head.size() + payload.size();
  size_t sent = 0;
  while (sent < total) {
    std::vector<iovec> rest = {iov[0], iov[1]};
    size_t skip = sent;
    for (iovec& v : rest) {
      size_t k = std::min(skip, v.iov_len);
      v.iov_base = static_cast<uint8_t*>(v.iov_base) + k;
      v.iov_len -= k;
      skip -= k;
    }
    ssize_t n = WritevNoSignal(fd_.get(), rest.data(), rest.size());
    if (n < 0) return ErrnoStatus(fmt::format("send {} reply to front end", vhost_user::RequestName(request)), static_cast<int>(-n));
    if (n == 0) {
      RETURN_IF_ERROR_CTX(WaitFd(fd_.get(), POLLOUT, kReplyTimeout, "vhost-user reply"),
                          fmt::format("send {} reply", vhost_user::RequestName(request)));
      continue;
    }
    sent += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace capsule::vsock
