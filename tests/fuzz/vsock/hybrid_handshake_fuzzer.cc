// libFuzzer target for both ends of Firecracker's hybrid-vsock handshake, a
// host client's "CONNECT <port>\n" answered by "OK <hostport>\n". The first
// input byte picks a mode:
//  0  the two line parsers: what they accept is the verb, a space and the
//     decimal digits of the value they return; every port formats and parses
//     back to itself;
//  1  capsule-vsockd's HybridListener on a real unix socket, the rest of
//     the input sent by a client in chunks: a client is handed over at most
//     once, exactly when its first line parses, with that port and every
//     byte after the line still in the socket; a bad or overlong line
//     closes the client;
//  2  the host client (HybridHandshake) against a back end that answers with
//     the rest of the input and closes: the back end reads exactly
//     "CONNECT <port>\n"; success exactly when the reply's first line is
//     "OK <hostport>"; bytes after it stay in the stream; and a back end
//     that closed fails the handshake at once, not at its deadline.
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/common/unix_stream.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/hybrid_dial.h"
#include "runtime/vsock/hybrid_listener.h"
#include "runtime/vsock/unix_socket.h"
#include "tests/fuzz/fuzz_io.h"

namespace capsule::vsock {
namespace {

using capsule::fuzz::DrainNow;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "hybrid_handshake_fuzzer invariant broken: %s\n", what);
    std::abort();
  }
}

// The value of a run of 1..10 decimal digits, decoded independently of the
// parsers under test; nullopt when `s` is anything else or above 2^32-1.
std::optional<uint32_t> Decimal(std::string_view s) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(v);
}

void FuzzParsers(std::string_view in) {
  if (auto p = ParseConnectLine(in)) {
    std::string_view s = in;
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
    Check(s.substr(0, 8) == "CONNECT ", "CONNECT accepted without its verb");
    s.remove_prefix(8);
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    Check(Decimal(s) == p, "CONNECT's port is not the value of its digits");
  }
  if (auto p = ParseOkLine(in)) {
    Check(in.substr(0, 3) == "OK ", "OK accepted without its verb");
    Check(Decimal(in.substr(3)) == p, "OK's port is not the value of its digits");
  }
  if (in.size() >= 4) {
    uint32_t v;
    std::memcpy(&v, in.data(), sizeof v);
    Check(ParseConnectLine(fmt::format("CONNECT {}", v)) == v, "CONNECT <port> does not parse back");
    Check(ParseConnectLine(fmt::format("CONNECT {}\r", v)) == v, "CONNECT <port>\\r does not parse back");
    Check(ParseOkLine(fmt::format("OK {}", v)) == v, "OK <port> does not parse back");
  }
}

// A static, so that libFuzzer's exit at the end of a timed run removes it
// (a bare mkdtemp left one directory in /tmp per run).
const std::string& SocketPath() {
  static const TempDir dir = [] {
    auto d = TempDir::Create("capsule-hybrid-fuzz");
    if (!d.ok()) std::abort();
    return std::move(*d);
  }();
  static const std::string path = dir.Join("vsock.sock");
  return path;
}

void FuzzListener(std::string_view in) {
  if (in.empty()) return;
  const size_t chunk = static_cast<uint8_t>(in[0]) % 32 + 1;
  const bool half_close = (static_cast<uint8_t>(in[0]) & 0x80) != 0;
  in.remove_prefix(1);
  auto loop = EventLoop::Create();
  if (!loop.ok()) return;
  int handed = 0;
  UniqueFd stream;
  uint32_t port = 0;
  auto listener = HybridListener::Listen(**loop, SocketPath(), [&](UniqueFd fd, uint32_t p) {
    ++handed;
    stream = std::move(fd);
    port = p;
  });
  if (!listener.ok()) return;
  auto client = ConnectUnix(SocketPath(), {.nonblocking = true});
  if (!client.ok()) return;
  (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
  std::string sent;
  for (size_t i = 0; i < in.size(); i += chunk) {
    std::string_view part = in.substr(i, chunk);
    ssize_t n = ::send(client->get(), part.data(), part.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) sent.append(part.substr(0, static_cast<size_t>(n)));
    (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
  }
  if (half_close) {
    ::shutdown(client->get(), SHUT_WR);
    (void)(*loop)->RunOnce(std::chrono::milliseconds(0));
  }
  Check(handed <= 1, "a client handed over twice");
  const size_t nl = sent.find('\n');
  const bool line_fits = nl != std::string::npos && nl < kMaxHandshakeLine;
  std::optional<uint32_t> want = line_fits ? ParseConnectLine(std::string_view(sent).substr(0, nl)) : std::nullopt;
  if (want) {
    Check(handed == 1 && port == *want, "a good CONNECT line was not handed over with its port");
    Check(DrainNow(stream.get()) == sent.substr(nl + 1), "bytes after the CONNECT line were lost or reordered");
    return;
  }
  Check(handed == 0, "a client handed over without a good CONNECT line");
  if (line_fits || sent.size() >= kMaxHandshakeLine) {
    Check((*listener)->pending() == 0, "a bad or overlong line left the client pending");
    // Closed: end of stream, or ECONNRESET when the listener closed with
    // the client's bytes still unread (AF_UNIX reports that, too).
    char c;
    ssize_t n = ::recv(client->get(), &c, 1, MSG_DONTWAIT);
    Check(n == 0 || (n < 0 && errno == ECONNRESET), "a bad or overlong line did not close the client");
  }
}

void FuzzDialer(std::string_view in) {
  if (in.size() < 4) return;
  uint32_t port;
  std::memcpy(&port, in.data(), sizeof port);
  std::string_view reply = in.substr(4, 4096);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  UniqueFd ours(sv[0]), backend(sv[1]);
  if (!SetNonBlocking(ours.get(), true).ok()) return;
  if (::send(backend.get(), reply.data(), reply.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(reply.size())) return;
  ::shutdown(backend.get(), SHUT_WR);
  constexpr std::chrono::milliseconds kTimeout{2000};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = HybridHandshake(std::move(ours), port, kTimeout, "fuzz");
  const auto took = std::chrono::steady_clock::now() - t0;
  Check(took < kTimeout / 2, "the handshake waited for its deadline on a closed back end");
  Check(DrainNow(backend.get()) == fmt::format("CONNECT {}\n", port), "the back end did not get exactly CONNECT <port>\\n");
  const size_t nl = reply.find('\n');
  // The reply line is read through a 32-byte peek buffer, newline included.
  const bool line_fits = nl != std::string_view::npos && nl < 32;
  std::optional<uint32_t> want = line_fits ? ParseOkLine(reply.substr(0, nl)) : std::nullopt;
  Check(r.ok() == want.has_value(), "the handshake's outcome disagrees with its reply line");
  if (!r.ok()) return;
  Check(r->host_port == *want, "the handshake returned another port than the OK line's");
  Check(DrainNow(r->fd.get()) == reply.substr(nl + 1), "bytes after the OK line were lost or reordered");
}

}  // namespace
}  // namespace capsule::vsock

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    capsule::log::SetLevel(capsule::log::Level::kError);
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: capsule::vsock::FuzzParsers(in); break;
    case 1: capsule::vsock::FuzzListener(in); break;
    default: capsule::vsock::FuzzDialer(in); break;
  }
  return 0;
}
