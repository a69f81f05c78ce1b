// The port-forward stream between the shim and the guest's agent, on guest
// vsock port guest_abi::kPortForwardVsockPort. After the agent token
// handshake (agent_auth.h), one request line and one reply line, then the
// stream carries the forwarded TCP connection's bytes both ways:
//   host  -> agent   "FORWARD <address> <port>\n"
//   agent -> host    "OK\n"                (the agent is connected)
//                    "ERR <reason>\n"      (and the agent closes)
// The address is the destination the forwarded connection had in the pod's
// netns: an IPv4 loopback address (127.0.0.0/8) or "::1". Port-forward
// means the pod's own loopback, so the agent refuses anything else: the
// host cannot use the forwarder to reach the guest's network beyond it.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::port_forward {

inline constexpr size_t kMaxRequestLine = 64;
inline constexpr size_t kMaxReplyLine = 128;

struct Target {
  int family = AF_INET;  // AF_INET or AF_INET6
  std::string address;   // "127.0.0.1" ... or "::1", as inet_ntop writes it
  uint16_t port = 0;

  std::string ToString() const;  // "127.0.0.1:8080", "[::1]:8080"
};

std::string FormatRequest(const Target& target);
// `line` without its '\n'. INVALID_ARGUMENT naming what is wrong: the verb,
// an address that is not loopback, a port out of 1..65535.
Result<Target> ParseRequest(std::string_view line);

// "OK\n", or "ERR <message>\n" with the message cut to fit the line and
// stripped of control bytes.
std::string FormatReply(const Status& status);
// `line` without its '\n': OK, or UNAVAILABLE carrying the agent's reason
// (bounded, printable; the guest is not trusted).
Status ParseReply(std::string_view line);

// Host side, on a stream already past the agent token handshake: sends the
// request and reads the reply within `timeout`.
Status Request(int fd, const Target& target, std::chrono::milliseconds timeout);

}  // namespace capsule::port_forward
