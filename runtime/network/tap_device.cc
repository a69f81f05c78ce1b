// TUNSETIFF on a fresh /dev/net/tun fd.
#include "runtime/network/tap_device.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sys/ioctl.h>

#include <cstring>

namespace capsule::network {

Result<UniqueFd> CreateTap(const std::string& name) {
  if (name.empty() || name.size() > kMaxIfNameLen || name.find_first_of("/: \t\n") != std::string::npos)
    return InvalidArgument("tap name '" + name + "': must be 1..15 characters without '/', ':' or blanks");
  UniqueFd fd(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open /dev/net/tun");
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name.data(), name.size());
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) != 0) return ErrnoStatus("TUNSETIFF tap " + name);
  return fd;
}

}  // namespace capsule::network
