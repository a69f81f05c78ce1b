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

Result<UniqueFd> ListenUnix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return InvalidArgument(fmt::format("unix socket path {} is longer than {} bytes", path, sizeof addr.sun_path - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return FailedPrecondition(fmt::format("{} exists and is not a socket", path));
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("remove stale socket " + path);
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return ErrnoStatus("socket(AF_UNIX)");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return ErrnoStatus("bind " + path);
  if (::chmod(path.c_str(), 0600) != 0) return ErrnoStatus("chmod 0600 " + path);
  if (::listen(fd.get(), kBacklog) != 0) return ErrnoStatus("listen on " + path);
  return fd;
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
  return endpoint.kind == Endpoint::Kind::kVsock ? ListenVsock(endpoint.port) : ListenUnix(endpoint.path);
}

}  // namespace capsule::agent::server
