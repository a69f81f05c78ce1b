// URL parsing, the upgrade request and the check of the server's answer.
#include "tests/support/streaming/websocket_handshake.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <vector>

namespace capsule::testing::streaming {
namespace {

// RFC 6455 section 1.3.
constexpr std::string_view kAcceptGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
// How much of a refusal's body goes into the error.
constexpr size_t kBodyQuoteBytes = 300;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitLines(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const size_t eol = head.find('\n');
    lines.push_back(Trim(head.substr(0, eol)));
    if (eol == std::string_view::npos) break;
    head.remove_prefix(eol + 1);
  }
  return lines;
}

// Whether a comma-separated header value holds `token` (case-insensitive).
bool HasToken(std::string_view value, std::string_view token) {
  const std::string want = Lower(token);
  while (true) {
    const size_t comma = value.find(',');
    if (Lower(Trim(value.substr(0, comma))) == want) return true;
    if (comma == std::string_view::npos) return false;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return InvalidArgument(fmt::format("URL {:?}: no scheme", url));
  const std::string scheme = Lower(url.substr(0, scheme_end));
  if (scheme == "https")
    return InvalidArgument(
        fmt::format("URL {}: https is not supported (plain HTTP only; containerd's "
                    "enable_tls_streaming must be off)",
                    url));
  if (scheme != "http") return InvalidArgument(fmt::format("URL {}: scheme {:?} is not http", url, scheme));
  std::string_view rest = url.substr(scheme_end + 3);
  const size_t slash = rest.find_first_of("/?");
  HttpUrl out;
  out.authority = std::string(rest.substr(0, slash));
  out.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (out.target.front() == '?') out.target.insert(0, "/");
  std::string_view hostport = out.authority;
  if (hostport.find('@') != std::string_view::npos)
    return InvalidArgument(fmt::format("URL {}: user info is not supported", url));
  std::string_view port_text;
  if (!hostport.empty() && hostport.front() == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) return InvalidArgument(fmt::format("URL {}: unterminated IPv6 literal", url));
    out.host = std::string(hostport.substr(1, close - 1));
    std::string_view after = hostport.substr(close + 1);
    if (!after.empty() && after.front() != ':')
      return InvalidArgument(fmt::format("URL {}: junk after the IPv6 literal", url));
    if (!after.empty()) port_text = after.substr(1);
  } else {
    const size_t colon = hostport.rfind(':');
    out.host = std::string(hostport.substr(0, colon));
    if (colon != std::string_view::npos) port_text = hostport.substr(colon + 1);
  }
  if (out.host.empty()) return InvalidArgument(fmt::format("URL {}: no host", url));
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 0xFFFF)
      return InvalidArgument(fmt::format("URL {}: bad port {:?}", url, port_text));
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("getrandom");
    }
    got += static_cast<size_t>(r);
  }
  return out;
}

std::string AcceptFor(std::string_view key) {
  const std::string input = std::string(key) + std::string(kAcceptGuid);
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int len = 0;
  // SHA-1 of a short string in memory cannot fail short of OOM.
  if (EVP_Digest(input.data(), input.size(), digest.data(), &len, EVP_sha1(), nullptr) != 1) return {};
  return Base64(std::string_view(reinterpret_cast<const char*>(digest.data()), len));
}

std::string UpgradeRequest(const HttpUrl& url, std::string_view key, std::string_view subprotocol) {
  return fmt::format(
      "GET {} HTTP/1.1\r\n"
      "Host: {}\r\n"
      "Upgrade: websocket\r\n"
      "Connection: Upgrade\r\n"
      "Sec-WebSocket-Key: {}\r\n"
      "Sec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Protocol: {}\r\n"
      "\r\n",
      url.target, url.authority, key, subprotocol);
}

Status CheckUpgradeResponse(std::string_view head, std::string_view body, std::string_view key,
                            std::string_view subprotocol) {
  const std::vector<std::string_view> lines = SplitLines(head);
  if (lines.empty() || lines[0].empty()) return Unavailable("empty response to the upgrade request");
  const std::string_view status_line = lines[0];
  // "HTTP/1.1 101 Switching Protocols"
  const size_t sp = status_line.find(' ');
  if (!status_line.starts_with("HTTP/1.") || sp == std::string_view::npos || status_line.substr(sp + 1, 3) != "101") {
    std::string quote(body.substr(0, kBodyQuoteBytes));
    return FailedPrecondition(fmt::format("upgrade refused: status line {:?}{}", status_line,
                                          quote.empty() ? "" : fmt::format(", body {:?}", quote)));
  }
  std::map<std::string, std::string> headers;  // lower-cased names; a repeated header joined with ","
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos) return Unavailable(fmt::format("malformed header line {:?}", lines[i]));
    std::string& v = headers[Lower(Trim(lines[i].substr(0, colon)))];
    v += (v.empty() ? "" : ",") + std::string(Trim(lines[i].substr(colon + 1)));
  }
  auto header = [&](const char* name) -> const std::string* {
    auto it = headers.find(name);
    return it == headers.end() ? nullptr : &it->second;
  };
  const std::string* upgrade = header("upgrade");
  if (upgrade == nullptr || !HasToken(*upgrade, "websocket"))
    return FailedPrecondition(fmt::format("101 without \"Upgrade: websocket\" (got {:?})", upgrade ? *upgrade : ""));
  const std::string* connection = header("connection");
  if (connection == nullptr || !HasToken(*connection, "upgrade"))
    return FailedPrecondition(
        fmt::format("101 without \"Connection: Upgrade\" (got {:?})", connection ? *connection : ""));
  const std::string* accept = header("sec-websocket-accept");
  if (accept == nullptr) return FailedPrecondition("101 without a Sec-WebSocket-Accept header");
  const std::string want = AcceptFor(key);
  if (*accept != want)
    return FailedPrecondition(
        fmt::format("Sec-WebSocket-Accept {:?} does not match our key (want {:?})", *accept, want));
  const std::string* protocol = header("sec-websocket-protocol");
  if (protocol == nullptr)
    return FailedPrecondition(fmt::format("the server picked no sub-protocol (asked for {:?})", subprotocol));
  if (*protocol != subprotocol)
    return FailedPrecondition(fmt::format("the server picked sub-protocol {:?}, not {:?}", *protocol, subprotocol));
  return Status::Ok();
}

}  // namespace capsule::testing::streaming
