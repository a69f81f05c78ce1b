#include "runtime/common/inet_sockaddr.h"

#include <arpa/inet.h>

namespace capsule {

Result<InetSockaddr> MakeInetSockaddr(int family, const std::string& address, uint16_t port) {
  InetSockaddr a;
  void* where = nullptr;
  if (family == AF_INET) {
    auto* sa = reinterpret_cast<sockaddr_in*>(&a.storage);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    where = &sa->sin_addr;
    a.len = sizeof *sa;
  } else if (family == AF_INET6) {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&a.storage);
    sa->sin6_family = AF_INET6;
    sa->sin6_port = htons(port);
    where = &sa->sin6_addr;
    a.len = sizeof *sa;
  } else {
    return InvalidArgument("not an IP address family: " + std::to_string(family));
  }
  if (::inet_pton(family, address.c_str(), where) != 1)
    return InvalidArgument("'" + address + "' is not an " + (family == AF_INET ? "IPv4" : "IPv6") + " address");
  return a;
}

InetSockaddr LoopbackSockaddr(int family, uint16_t port) {
  return *MakeInetSockaddr(family, family == AF_INET6 ? "::1" : "127.0.0.1", port);
}

}  // namespace capsule
