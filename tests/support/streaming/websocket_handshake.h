// The client side of the WebSocket opening handshake (RFC 6455 section 4)
// over plain HTTP/1.1: the URL parsed, the upgrade request written, the
// server's response head checked (101, Upgrade, Connection, the
// Sec-WebSocket-Accept derived from our key, the sub-protocol picked).
// ChannelStream::Open does the socket I/O around these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::testing::streaming {

// The parts of an http:// URL a client needs.
struct HttpUrl {
  std::string host;  // without brackets for an IPv6 literal
  uint16_t port = 80;
  std::string authority;  // host[:port] as written, for the Host header
  std::string target;     // path and query ("/exec/TOKEN?x=1"), "/" when empty
};

// http://host[:port][/path][?query] only: https (and any other scheme) is
// refused, naming the scheme; so is a missing host or a bad port.
Result<HttpUrl> ParseHttpUrl(std::string_view url);

// Standard base64 with padding (RFC 4648 section 4).
std::string Base64(std::string_view bytes);

// `n` bytes from the kernel's random source (getrandom).
Result<std::string> RandomBytes(size_t n);

// The Sec-WebSocket-Accept a server must answer to `key`:
// base64(SHA-1(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")).
std::string AcceptFor(std::string_view key);

// The GET request that asks for the upgrade, ending with the blank line.
std::string UpgradeRequest(const HttpUrl& url, std::string_view key, std::string_view subprotocol);

// Checks a response head (status line and headers, up to and without the
// blank line) against the request made with `key` and `subprotocol`. The
// error names what was wrong: the status line, a missing or wrong header.
// `body` (what followed the head, if anything) is quoted for a non-101.
Status CheckUpgradeResponse(std::string_view head, std::string_view body, std::string_view key,
                            std::string_view subprotocol);

}  // namespace capsule::testing::streaming
