// ttrpc's unix socket helpers; listening and dialing are runtime/common's.
#include "runtime/ttrpc/unix_socket.h"

#include <sys/socket.h>

#include "runtime/common/unix_stream.h"

namespace capsule::ttrpc {

std::string StripUnixScheme(std::string_view address) {
  constexpr std::string_view kScheme = "unix://";
  if (address.substr(0, kScheme.size()) == kScheme) address.remove_prefix(kScheme.size());
  return std::string(address);
}

Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode) {
  UnixListenOptions o;
  o.mode = mode;
  return capsule::ListenUnix(path, o);
}

Result<uid_t> PeerUid(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return ErrnoStatus("getsockopt(SO_PEERCRED)");
  }
  return cred.uid;
}

bool IsListeningSocket(int fd) {
  int val = 0;
  socklen_t len = sizeof val;
  return ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &val, &len) == 0 && val != 0;
}

}  // namespace capsule::ttrpc
