// SIOCGIFFLAGS/SIOCSIFFLAGS on a throwaway datagram socket: the simplest
// interface to the one flag we need (netlink comes with guest networking).
#include "agent/init/network.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>

#include "runtime/common/unique_fd.h"

namespace capsule::agent::init {

Status BringUpInterface(const std::string& name) {
  if (name.empty() || name.size() >= IFNAMSIZ) return InvalidArgument("bad interface name '" + name + "'");
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) return ErrnoStatus("socket(AF_INET) to configure " + name);
  ifreq req{};
  std::memcpy(req.ifr_name, name.c_str(), name.size() + 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &req) != 0) return ErrnoStatus("get flags of " + name);
  req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP);
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &req) != 0) return ErrnoStatus("bring up " + name);
  return Status::Ok();
}

}  // namespace capsule::agent::init
