// Sending a descriptor along with bytes over a unix socket (SCM_RIGHTS,
// unix(7)): the one sendmsg both the QMP client (getfd) and the agent's
// launcher sync channel need.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace capsule {

// One sendmsg(MSG_NOSIGNAL) of `data`, with `fd` attached when >= 0 (the
// receiver gets it with the first byte). Retries EINTR; returns the bytes
// sent, or -1 with errno set. A partial send carried the fd: send the rest
// without it.
ssize_t SendWithFd(int sock, const void* data, size_t len, int fd);

}  // namespace capsule
