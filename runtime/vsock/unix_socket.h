// Unix stream socket helpers shared by the vhost-user server, the hybrid
// listener and the dialers: bind (replacing only a stale socket file) and
// SIGPIPE-free writes. Dialing is runtime/common/unix_stream.h's ConnectUnix.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <chrono>
#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::vsock {

// Binds and listens on `path` (mode 0600). A leftover socket file nobody
// accepts on is replaced; a live one is ALREADY_EXISTS.
Result<UniqueFd> ListenUnix(const std::string& path, int backlog = 128);
// sendmsg(MSG_NOSIGNAL) of an iovec array: bytes written, 0 on EAGAIN, or
// the errno as a negative value.
ssize_t WritevNoSignal(int fd, const iovec* iov, size_t count);
// Waits until `fd` has any of `events` (poll flags) or `timeout` passes.
Status WaitFd(int fd, short events, std::chrono::milliseconds timeout, const char* what);

}  // namespace capsule::vsock
