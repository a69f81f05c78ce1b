// Socket helpers the fuzzers share.
#pragma once

#include <sys/socket.h>

#include <string>

namespace capsule::fuzz {

// Whatever `fd` holds right now, without waiting.
inline std::string DrainNow(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace capsule::fuzz
