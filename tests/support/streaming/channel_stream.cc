// ChannelStream: socket I/O around the handshake and frame codec, message
// reassembly, control frames, and the per-channel collectors.
#include "tests/support/streaming/channel_stream.h"

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "tests/support/streaming/websocket_handshake.h"

namespace capsule::testing::streaming {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Bound on the server's response head (status line and headers).
constexpr size_t kMaxResponseHead = 16 * 1024;
// How long one Send may wait for room in the socket buffer.
constexpr milliseconds kSendTimeout{30000};
// How much of each channel a DEADLINE_EXCEEDED quotes.
constexpr size_t kQuoteBytes = 200;
// Sec-WebSocket-Key: 16 random bytes (RFC 6455 section 4.1).
constexpr size_t kKeyBytes = 16;

int MillisLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// Waits for `events` on fd until the deadline: OK, or DEADLINE_EXCEEDED.
Status WaitFor(int fd, short events, Clock::time_point deadline, std::string_view what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n > 0) return Status::Ok();
    if (n == 0) return DeadlineExceeded(fmt::format("{}: timed out", what));
    if (errno != EINTR) return ErrnoStatus(fmt::format("poll ({})", what));
  }
}

Result<UniqueFd> ConnectTcp(const HttpUrl& url, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(url.port);
  if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return Unavailable(fmt::format("resolve {}: {}", url.host, ::gai_strerror(rc)));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs(res, &::freeaddrinfo);
  Status last = Unavailable(fmt::format("connect {}: no address", url.authority));
  for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd) return ErrnoStatus("socket");
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = ErrnoStatus(fmt::format("connect {}", url.authority));
        continue;
      }
      Status waited = WaitFor(fd.get(), POLLOUT, deadline, fmt::format("connect {}", url.authority));
      if (!waited.ok()) return waited;
      int err = 0;
      socklen_t len = sizeof err;
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return ErrnoStatus("getsockopt SO_ERROR");
      if (err != 0) {
        last = ErrnoStatus(fmt::format("connect {}", url.authority), err);
        continue;
      }
    }
    const int one = 1;
    // Small interactive frames: no Nagle delay. A failure only costs latency.
    (void)::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  return last;
}

Status WriteAll(int fd, std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "send"));
      continue;
    }
    return ErrnoStatus("send");
  }
  return Status::Ok();
}

// Reads the response head into `*buf` until the blank line; returns its
// end (the offset of "\r\n\r\n").
Result<size_t> ReadHead(int fd, std::string* buf, Clock::time_point deadline) {
  for (;;) {
    if (size_t end = buf->find("\r\n\r\n"); end != std::string::npos) return end;
    if (buf->size() > kMaxResponseHead)
      return ResourceExhausted(fmt::format("response head over {} bytes", kMaxResponseHead));
    RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "read the upgrade response"));
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return ErrnoStatus("recv the upgrade response");
    if (n == 0)
      return Unavailable(fmt::format("connection closed before the end of the response head ({} bytes: {:?})",
                                     buf->size(), buf->substr(0, kQuoteBytes)));
    buf->append(chunk, static_cast<size_t>(n));
  }
}

std::string Quote(const ChannelOutput& out) {
  if (out.channels.empty()) return "nothing";
  std::string s;
  for (const auto& [ch, data] : out.channels) {
    s += fmt::format("{}channel {}: {:?}{}", s.empty() ? "" : ", ", ch, data.substr(0, kQuoteBytes),
                     data.size() > kQuoteBytes ? "..." : "");
  }
  return s;
}

}  // namespace

const std::string& ChannelOutput::Of(uint8_t channel) const {
  static const std::string kEmpty;
  auto it = channels.find(channel);
  return it == channels.end() ? kEmpty : it->second;
}

ChannelStream::ChannelStream(UniqueFd fd, std::string url, std::string buffered)
    : fd_(std::move(fd)), url_(std::move(url)), rx_(std::move(buffered)) {}

Result<ChannelStream> ChannelStream::Open(const std::string& url, std::string_view subprotocol,
                                          std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto context = [&](const Status& st) { return st.WithContext("websocket " + url); };
  auto parsed = ParseHttpUrl(url);
  if (!parsed.ok()) return parsed.status();
  auto fd = ConnectTcp(*parsed, deadline);
  if (!fd.ok()) return context(fd.status());
  auto key_bytes = RandomBytes(kKeyBytes);
  if (!key_bytes.ok()) return context(key_bytes.status());
  const std::string key = Base64(*key_bytes);
  Status sent = WriteAll(fd->get(), UpgradeRequest(*parsed, key, subprotocol), deadline);
  if (!sent.ok()) return context(sent.WithContext("send the upgrade request"));
  std::string buf;
  auto head_end = ReadHead(fd->get(), &buf, deadline);
  if (!head_end.ok()) return context(head_end.status());
  const std::string_view head = std::string_view(buf).substr(0, *head_end);
  const std::string_view rest = std::string_view(buf).substr(*head_end + 4);
  Status checked = CheckUpgradeResponse(head, rest, key, subprotocol);
  if (!checked.ok()) return context(checked);
  return ChannelStream(std::move(*fd), url, std::string(rest));
}

Status ChannelStream::Error(const Status& why) const { return why.WithContext("websocket " + url_); }

Status ChannelStream::Fail(uint16_t code, const Status& why) {
  if (fd_ && !close_sent_) {
    auto mask = RandomBytes(4);
    if (mask.ok()) {
      std::array<uint8_t, 4> m{};
      std::memcpy(m.data(), mask->data(), 4);
      // Best effort: the stream is being given up on anyway.
      (void)WriteAll(fd_.get(), EncodeClientFrame(Opcode::kClose, ClosePayload(code), m),
                     Clock::now() + milliseconds(1000));
    }
  }
  close_sent_ = true;
  ended_ = true;
  fd_.reset();
  return Error(why);
}

Status ChannelStream::SendFrame(Opcode opcode, std::string_view payload) {
  if (!fd_) return Error(FailedPrecondition("the stream is closed"));
  ASSIGN_OR_RETURN(std::string mask_bytes, RandomBytes(4));
  std::array<uint8_t, 4> mask{};
  std::memcpy(mask.data(), mask_bytes.data(), mask.size());
  Status st = WriteAll(fd_.get(), EncodeClientFrame(opcode, payload, mask), Clock::now() + kSendTimeout);
  return st.ok() ? st : Error(st);
}

Status ChannelStream::Send(uint8_t channel, std::string_view data) {
  if (ended_ || close_sent_)
    return Error(FailedPrecondition(fmt::format("send on channel {}: the stream has ended", channel)));
  std::string message;
  message.reserve(data.size() + 1);
  message.push_back(static_cast<char>(channel));
  message.append(data);
  return SendFrame(Opcode::kBinary, message);
}

Status ChannelStream::SendResize(uint16_t width, uint16_t height) {
  return Send(kResizeChannel, fmt::format("{{\"Width\":{},\"Height\":{}}}", width, height));
}

Status ChannelStream::Fill(Clock::time_point deadline) {
  for (;;) {
    Status waited = WaitFor(fd_.get(), POLLIN, deadline, "read");
    if (!waited.ok()) return waited;
    char chunk[16384];
    const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      // A reset after the server's last frame reads as the end here.
      if (errno == ECONNRESET) {
        eof_ = true;
        return Status::Ok();
      }
      return ErrnoStatus("recv");
    }
    if (n == 0) eof_ = true;
    rx_.append(chunk, static_cast<size_t>(n));
    return Status::Ok();
  }
}

Status ChannelStream::HandleFrame(Frame frame, std::optional<ChannelMessage>* out) {
  switch (frame.opcode) {
    case Opcode::kPing:
      if (close_sent_) return Status::Ok();
      return SendFrame(Opcode::kPong, frame.payload);
    case Opcode::kPong:
      return Status::Ok();
    case Opcode::kClose: {
      if (frame.payload.size() == 1)
        return Fail(kCloseProtocolError, InvalidArgument("close frame with a 1-byte payload"));
      if (frame.payload.size() >= 2) {
        close_code_ = static_cast<uint16_t>((static_cast<uint8_t>(frame.payload[0]) << 8) |
                                            static_cast<uint8_t>(frame.payload[1]));
        close_reason_ = frame.payload.substr(2);
      }
      if (!close_sent_) {
        // Echo the code (RFC 6455 5.5.1); the server may already be gone.
        (void)SendFrame(Opcode::kClose, ClosePayload(close_code_.value_or(kCloseNormal)));
        close_sent_ = true;
      }
      ended_ = true;
      ::shutdown(fd_.get(), SHUT_RDWR);
      return Status::Ok();
    }
    case Opcode::kContinuation:
      if (!in_message_) return Fail(kCloseProtocolError, InvalidArgument("continuation frame outside a message"));
      break;
    case Opcode::kText:
    case Opcode::kBinary:
      if (in_message_) return Fail(kCloseProtocolError, InvalidArgument("new data frame inside a fragmented message"));
      in_message_ = true;
      partial_.clear();
      break;
  }
  if (frame.payload.size() > max_message_bytes_ - partial_.size())
    return Fail(kCloseTooBig, ResourceExhausted(fmt::format("message over the limit of {} bytes", max_message_bytes_)));
  partial_.append(frame.payload);
  if (!frame.fin) return Status::Ok();
  in_message_ = false;
  if (partial_.empty()) return Status::Ok();  // no channel byte: nothing to deliver
  ChannelMessage message;
  message.channel = static_cast<uint8_t>(partial_.front());
  message.payload.assign(partial_, 1);
  partial_.clear();
  *out = std::move(message);
  return Status::Ok();
}

Result<std::optional<ChannelMessage>> ChannelStream::ReadFromSocket(Clock::time_point deadline) {
  for (;;) {
    if (ended_) return std::optional<ChannelMessage>();
    if (!fd_) return Error(FailedPrecondition("the stream is closed"));
    size_t consumed = 0;
    const size_t budget = std::max(max_message_bytes_ - partial_.size(), kMaxControlPayload);
    auto frame = DecodeServerFrame(rx_, budget, &consumed);
    if (!frame.ok()) {
      const uint16_t code = frame.status().code() == Code::kResourceExhausted ? kCloseTooBig : kCloseProtocolError;
      return Fail(code, frame.status());
    }
    if (frame->has_value()) {
      rx_.erase(0, consumed);
      std::optional<ChannelMessage> message;
      RETURN_IF_ERROR(HandleFrame(std::move(**frame), &message));
      if (message) return message;
      continue;
    }
    if (eof_) {
      ended_ = true;
      fd_.reset();
      if (!rx_.empty() || in_message_)
        return Error(
            Unavailable(fmt::format("connection closed in the middle of a frame ({} bytes left over)", rx_.size())));
      return std::optional<ChannelMessage>();
    }
    Status filled = Fill(deadline);
    if (!filled.ok()) return Error(filled);
  }
}

Result<std::optional<ChannelMessage>> ChannelStream::Read(std::chrono::milliseconds timeout) {
  if (!kept_.empty()) {
    ChannelMessage m = std::move(kept_.front());
    kept_.pop_front();
    return std::optional<ChannelMessage>(std::move(m));
  }
  return ReadFromSocket(Clock::now() + timeout);
}

Result<ChannelOutput> ChannelStream::CollectUntil(const std::function<bool(const ChannelOutput&)>& done,
                                                  std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  ChannelOutput out;
  while (!done(out)) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    auto message = Read(std::max(left, milliseconds(0)));
    if (!message.ok()) {
      return Status(message.status().code(), fmt::format("{} (after {} ms; so far: {})", message.status().message(),
                                                         timeout.count(), Quote(out)));
    }
    if (!message->has_value()) {
      out.ended = true;
      break;
    }
    out.channels[(*message)->channel] += (*message)->payload;
  }
  return out;
}

Result<ChannelOutput> ChannelStream::CollectUntilClose(std::chrono::milliseconds timeout) {
  return CollectUntil([](const ChannelOutput&) { return false; }, timeout);
}

Status ChannelStream::ReadPortForwardHeaders(const std::vector<uint16_t>& ports, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::map<uint8_t, uint16_t> want;  // channel -> its port, until its header came
  for (size_t i = 0; i < ports.size(); ++i) {
    want[PortForwardDataChannel(i)] = ports[i];
    want[PortForwardErrorChannel(i)] = ports[i];
  }
  while (!want.empty()) {
    ASSIGN_OR_RETURN(auto message, ReadFromSocket(deadline));
    if (!message)
      return Error(
          Unavailable(fmt::format("the stream ended before the port header on channel {}", want.begin()->first)));
    auto it = want.find(message->channel);
    if (it == want.end()) {
      kept_.push_back(std::move(*message));
      continue;
    }
    const std::string& p = message->payload;
    if (p.size() != 2)
      return Error(InvalidArgument(fmt::format("port header on channel {} is {} bytes, not 2", it->first, p.size())));
    const uint16_t port = static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | (static_cast<uint8_t>(p[1]) << 8));
    if (port != it->second)
      return Error(
          InvalidArgument(fmt::format("port header on channel {} names port {}, not {}", it->first, port, it->second)));
    want.erase(it);
  }
  return Status::Ok();
}

Status ChannelStream::Close(std::chrono::milliseconds timeout) {
  if (ended_ || !fd_) {
    fd_.reset();
    return Status::Ok();
  }
  const auto deadline = Clock::now() + timeout;
  if (!close_sent_) {
    Status sent = SendFrame(Opcode::kClose, ClosePayload(kCloseNormal));
    close_sent_ = true;
    if (!sent.ok()) {
      ended_ = true;
      fd_.reset();
      return sent;
    }
  }
  for (;;) {
    auto message = ReadFromSocket(deadline);
    if (!message.ok()) {
      ended_ = true;
      fd_.reset();
      return message.status().WithContext("close");
    }
    if (!message->has_value()) break;  // the server's close, or EOF
  }
  fd_.reset();
  return Status::Ok();
}

}  // namespace capsule::testing::streaming
