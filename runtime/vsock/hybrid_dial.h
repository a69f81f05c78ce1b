// The client side of Firecracker's hybrid vsock: connect to the VM's unix
// socket, send "CONNECT <port>\n", read "OK <hostport>\n", then the socket
// is a byte stream to the guest port. Used by VsockdVsock::Dial and by
// anything that wants a raw stream (capsule-runtime, tests).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::vsock {

struct HybridStream {
  UniqueFd fd;             // blocking, CLOEXEC; nothing past "OK ...\n" consumed
  uint32_t host_port = 0;  // our end's vsock port, from the OK line
};

// UNAVAILABLE when the socket is missing or the guest refused (closed before
// OK); DEADLINE_EXCEEDED when no answer came within `timeout`.
Result<HybridStream> DialHybrid(const std::string& uds_path, uint32_t port, std::chrono::milliseconds timeout);

// The handshake alone, on a connected non-blocking unix stream `fd`
// (DialHybrid is ConnectUnix and this); `what` prefixes every error.
Result<HybridStream> HybridHandshake(UniqueFd fd, uint32_t port, std::chrono::milliseconds timeout,
                                     const std::string& what);

// Parses the back end's reply "OK <hostport>" (newline stripped by the
// caller). nullopt for anything else.
std::optional<uint32_t> ParseOkLine(std::string_view line);

}  // namespace capsule::vsock
