// ChannelStream: a blocking WebSocket client (RFC 6455) for the Kubernetes
// "channel" sub-protocols that containerd 1.6's CRI streaming server
// (k8s.io/kubelet/pkg/cri/streaming, websocket path, no SPDY) serves for
// Exec, Attach and PortForward URLs. Each binary message is one channel
// byte followed by that channel's payload. Open does the HTTP upgrade;
// Read reassembles fragmented messages, answers pings and close frames;
// Send writes one masked frame per message.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "tests/support/streaming/websocket_frame.h"

namespace capsule::testing::streaming {

// The binary channel protocol, version 4 (k8s.io/apimachinery remotecommand
// and portforward): the status arrives on the error channel as JSON.
inline constexpr std::string_view kV4ChannelProtocol = "v4.channel.k8s.io";

// remotecommand channels (exec, attach), from k8s.io/apimachinery's
// pkg/util/remotecommand and the kubelet's cri/streaming/remotecommand.
inline constexpr uint8_t kStdinChannel = 0;
inline constexpr uint8_t kStdoutChannel = 1;
inline constexpr uint8_t kStderrChannel = 2;
inline constexpr uint8_t kErrorChannel = 3;   // a metav1.Status as JSON (ParseExecStatus)
inline constexpr uint8_t kResizeChannel = 4;  // {"Width":W,"Height":H}

// portforward channels: the i-th requested port has data channel 2i and
// error channel 2i+1; the server opens each with the port, 2 bytes LE.
constexpr uint8_t PortForwardDataChannel(size_t port_index) { return static_cast<uint8_t>(2 * port_index); }
constexpr uint8_t PortForwardErrorChannel(size_t port_index) { return static_cast<uint8_t>(2 * port_index + 1); }

// Default bound on one reassembled message, against a server that lies
// about lengths (containerd caps exec output it buffers at 16 MiB too).
inline constexpr size_t kDefaultMaxMessageBytes = 16u << 20;

struct ChannelMessage {
  uint8_t channel = 0;
  std::string payload;
};

// Payload gathered per channel, in arrival order.
struct ChannelOutput {
  std::map<uint8_t, std::string> channels;
  bool ended = false;  // the stream ended (close frame or EOF)

  // What arrived on `channel` ("" when nothing did).
  const std::string& Of(uint8_t channel) const;
};

class ChannelStream {
 public:
  // Connects to `url` (http:// only), asks for `subprotocol`, and checks the
  // server's 101 answer; all within `timeout`. Errors name the URL and what
  // was wrong (the status line and body of a refusal, a missing or wrong
  // header, the sub-protocol the server picked).
  static Result<ChannelStream> Open(const std::string& url, std::string_view subprotocol,
                                    std::chrono::milliseconds timeout);

  ChannelStream(ChannelStream&&) noexcept = default;
  ChannelStream& operator=(ChannelStream&&) noexcept = default;
  ChannelStream(const ChannelStream&) = delete;
  ChannelStream& operator=(const ChannelStream&) = delete;
  // Closes the socket without a close handshake (Close does one).
  ~ChannelStream() = default;

  // One unfragmented binary frame, masked with a fresh random key:
  // `channel` then `data`. FAILED_PRECONDITION once the stream has ended.
  Status Send(uint8_t channel, std::string_view data);
  // A terminal resize on kResizeChannel.
  Status SendResize(uint16_t width, uint16_t height);

  // The next message, or nullopt when the stream has ended (the server's
  // close frame, answered with ours, or EOF). DEADLINE_EXCEEDED when no
  // whole message came within `timeout` (what came stays buffered); a
  // protocol violation or an oversized message is an error and ends the
  // stream. Pings are answered, pongs dropped, empty messages skipped.
  Result<std::optional<ChannelMessage>> Read(std::chrono::milliseconds timeout);

  // Gathers payload per channel until `done(output)` holds or the stream
  // ends, whichever is first. DEADLINE_EXCEEDED (quoting what came so far)
  // when neither happens within `timeout`.
  Result<ChannelOutput> CollectUntil(const std::function<bool(const ChannelOutput&)>& done,
                                     std::chrono::milliseconds timeout);
  // Gathers payload per channel until the stream ends.
  Result<ChannelOutput> CollectUntilClose(std::chrono::milliseconds timeout);

  // Port-forward: consumes the 2-byte little-endian port message the
  // server first sends on the data and the error channel of each of
  // `ports` (in request order), checking each names its port. Messages on
  // other channels meanwhile are kept for Read.
  Status ReadPortForwardHeaders(const std::vector<uint16_t>& ports, std::chrono::milliseconds timeout);

  // The close handshake: our close frame (1000), then messages dropped
  // until the server's close or EOF, then the socket shut. OK at once when
  // the stream has already ended; DEADLINE_EXCEEDED when the server did
  // not answer within `timeout` (the socket is shut either way).
  Status Close(std::chrono::milliseconds timeout);

  // Bound on one reassembled message (default kDefaultMaxMessageBytes).
  void set_max_message_bytes(size_t n) { max_message_bytes_ = n; }

  bool ended() const { return ended_; }
  // The status code of the server's close frame, when it sent one with a code.
  std::optional<uint16_t> close_code() const { return close_code_; }
  const std::string& close_reason() const { return close_reason_; }
  const std::string& url() const { return url_; }

 private:
  using Clock = std::chrono::steady_clock;

  ChannelStream(UniqueFd fd, std::string url, std::string buffered);

  // Read without the messages ReadPortForwardHeaders kept.
  Result<std::optional<ChannelMessage>> ReadFromSocket(Clock::time_point deadline);
  // Handles one decoded frame; a whole data message goes to `*out`.
  Status HandleFrame(Frame frame, std::optional<ChannelMessage>* out);
  // Appends what the socket has to rx_; sets eof_ at EOF.
  Status Fill(Clock::time_point deadline);
  Status SendFrame(Opcode opcode, std::string_view payload);
  // Ends the stream after a protocol error: a best-effort close frame with
  // `code`, the socket shut; returns `why` with the URL.
  Status Fail(uint16_t code, const Status& why);
  Status Error(const Status& why) const;

  UniqueFd fd_;
  std::string url_;
  std::string rx_;       // bytes read, not yet decoded
  std::string partial_;  // a fragmented message so far
  bool in_message_ = false;
  bool eof_ = false;
  bool ended_ = false;
  bool close_sent_ = false;
  std::optional<uint16_t> close_code_;
  std::string close_reason_;
  std::deque<ChannelMessage> kept_;  // set aside by ReadPortForwardHeaders
  size_t max_message_bytes_ = kDefaultMaxMessageBytes;
};

}  // namespace capsule::testing::streaming
