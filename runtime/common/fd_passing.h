// Sending a descriptor along with bytes over a unix socket (SCM_RIGHTS,
// unix(7)), and receiving one: the one sendmsg and recvmsg that the QMP
// client (getfd), the agent's launcher sync channel and the pool's agent
// stream hand-over need.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "runtime/common/unique_fd.h"

namespace capsule {

// One sendmsg(MSG_NOSIGNAL) of `data`, with `fd` attached when >= 0 (the
// receiver gets it with the first byte). Retries EINTR; returns the bytes
// sent, or -1 with errno set. A partial send carried the fd: send the rest
// without it.
ssize_t SendWithFd(int sock, const void* data, size_t len, int fd);

// One recvmsg(MSG_CMSG_CLOEXEC) into `data`. A descriptor that came with
// the bytes goes to *fd (reset otherwise); any more than one are closed, a
// sender gets no way to leak descriptors into us. Retries EINTR; returns
// the bytes received (0: end of stream), or -1 with errno set.
ssize_t RecvWithFd(int sock, void* data, size_t len, UniqueFd* fd);

}  // namespace capsule
