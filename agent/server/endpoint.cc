// socket/bind/listen for AF_VSOCK and AF_UNIX.
#include "agent/server/endpoint.h"

#include <fmt/format.h>
#include <linux/vm_sockets.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

#include "runtime/common/unix_stream.h"

namespace capsule::agent::server {
namespace {

constexpr int kBacklog = 16;

Result<UniqueFd> ListenVsock(uint32_t port) {
  UniqueFd fd(::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoStatus("socket(AF_VSOCK) (is the vsock module loaded?)");
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = VMADDR_CID_ANY;
  addr.svm_port = port;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return ErrnoStatus(fmt::format("bind vsock port {}", port));
  }
  if (::listen(fd.get(), kBacklog) != 0) return ErrnoStatus(fmt::format("listen on vsock port {}", port));
  return fd;
}

// --no-init tests: a stale socket of an earlier run is replaced.
Result<UniqueFd> ListenUnixEndpoint(const std::string& path) {
  UnixListenOptions o;
  o.backlog = kBacklog;
  o.existing = UnixListenOptions::Existing::kReplaceStale;
  return ListenUnix(path, o);
}

}  // namespace

std::string Endpoint::ToString() const {
  return kind == Kind::kVsock ? fmt::format("vsock:{}", port) : "unix:" + path;
}

Result<Endpoint> ParseEndpoint(std::string_view text) {
  Endpoint ep;
  if (text.rfind("vsock:", 0) == 0) {
    std::string_view num = text.substr(6);
    uint32_t port = 0;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), port);
    if (num.empty() || ec != std::errc() || end != num.data() + num.size() || port == VMADDR_PORT_ANY) {
      return InvalidArgument(fmt::format("listen address '{}': bad vsock port", text));
    }
    ep.kind = Endpoint::Kind::kVsock;
    ep.port = port;
    return ep;
  }
  if (text.rfind("unix:", 0) == 0 && text.size() > 6 && text[5] == '/') {
    ep.kind = Endpoint::Kind::kUnix;
    ep.path = std::string(text.substr(5));
    return ep;
  }
  return InvalidArgument(fmt::format("listen address '{}' is neither vsock:PORT nor unix:/ABS/PATH", text));
}

Result<UniqueFd> Listen(const Endpoint& endpoint) {
  return endpoint.kind == Endpoint::Kind::kVsock ? ListenVsock(endpoint.port) : ListenUnixEndpoint(endpoint.path);
}

}  // namespace capsule::agent::server
