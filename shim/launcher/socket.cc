// Socket address derivation (sha256), probing and listening.
#include "shim/launcher/socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "runtime/common/sha256.h"
#include "runtime/common/unix_stream.h"

namespace capsule::shim::launcher {
namespace {

// Directory mode for the socket dir: only the owner (root) may look inside.
constexpr mode_t kSocketDirMode = 0700;

Result<sockaddr_un> UnixAddr(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty()) return InvalidArgument("empty unix socket path");
  if (path.size() > kSocketPathLimit)
    return InvalidArgument(fmt::format("unix socket path \"{}\" is longer than {} bytes", path,
                                       kSocketPathLimit));
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

}  // namespace

std::string CleanPath(std::string_view path) {
  if (path.empty()) return ".";
  const bool rooted = path[0] == '/';
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    std::string_view elem = path.substr(pos, next - pos);
    pos = next + 1;
    if (elem.empty() || elem == ".") continue;
    if (elem == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!rooted) {
        parts.push_back(elem);  // a relative path may climb; "/.." is "/"
      }
      continue;
    }
    parts.push_back(elem);
  }
  std::string out = rooted ? "/" : "";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  return out.empty() ? "." : out;
}

std::string SocketDir() {
  const char* env = std::getenv(kSocketDirEnv);
  return (env != nullptr && *env != '\0') ? std::string(env) : std::string(kDefaultSocketDir);
}

std::string SocketAddress(std::string_view containerd_address, std::string_view ns,
                          std::string_view group, std::string_view socket_dir) {
  // filepath.Join skips empty elements before cleaning.
  std::string joined;
  for (std::string_view part : {containerd_address, ns, group}) {
    if (part.empty()) continue;
    if (!joined.empty()) joined += '/';
    joined += part;
  }
  return fmt::format("unix://{}/{}", CleanPath(socket_dir), Sha256Hex(CleanPath(joined)));
}

Result<std::string> SocketPathFromAddress(std::string_view address) {
  constexpr std::string_view kScheme = "unix://";
  if (!address.starts_with(kScheme))
    return InvalidArgument(fmt::format("shim address \"{}\" is not unix://PATH", address));
  std::string path(address.substr(kScheme.size()));
  if (path.empty() || path[0] != '/')
    return InvalidArgument(fmt::format("shim address \"{}\" has no absolute path", address));
  return path;
}

bool CanConnect(const std::string& path) {
  auto addr = UnixAddr(path);
  if (!addr.ok()) return false;
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return false;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(sockaddr_un)) == 0)
    return true;
  // A unix connect completes at once or fails; EAGAIN means the backlog is
  // full, which still proves a listener.
  if (errno == EAGAIN) return true;
  if (errno != EINPROGRESS) return false;
  pollfd p{fd.get(), POLLOUT, 0};
  if (::poll(&p, 1, kConnectProbeTimeoutMs) != 1) return false;
  int err = 0;
  socklen_t len = sizeof err;
  return ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode) {
  RETURN_IF_ERROR(UnixAddr(path).status());  // its limit is containerd's, tighter than sun_path
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) RETURN_IF_ERROR(MkdirAll(dir, kSocketDirMode));
  UnixListenOptions o;
  o.mode = mode;
  // The shim binds before any thread of its own runs; its socket dir may
  // be reachable by others.
  o.restrict_umask_at_bind = true;
  return capsule::ListenUnix(path, o);
}

Result<std::string> BoundPath(int fd) {
  sockaddr_un addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return ErrnoStatus("getsockname fd " + std::to_string(fd));
  if (addr.sun_family != AF_UNIX)
    return InvalidArgument(fmt::format("fd {} is not a unix socket", fd));
  const size_t path_len = len - offsetof(sockaddr_un, sun_path);
  if (path_len == 0 || addr.sun_path[0] == '\0')
    return InvalidArgument(fmt::format("fd {} is not bound to a filesystem path", fd));
  return std::string(addr.sun_path, strnlen(addr.sun_path, path_len));
}

}  // namespace capsule::shim::launcher
