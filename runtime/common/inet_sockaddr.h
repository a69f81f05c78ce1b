// An IPv4 or IPv6 socket address from its parts, for bind(2) and connect(2):
// the port-forward listener (pod netns loopback), the agent's forwarder
// (guest loopback) and their tests build the same sockaddr_in/_in6.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "runtime/common/status.h"

namespace capsule {

struct InetSockaddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// `address` as inet_pton reads it for `family` (AF_INET or AF_INET6).
// INVALID_ARGUMENT naming it when it does not parse.
Result<InetSockaddr> MakeInetSockaddr(int family, const std::string& address, uint16_t port);
// 127.0.0.1 or ::1.
InetSockaddr LoopbackSockaddr(int family, uint16_t port);

}  // namespace capsule
