// ListenUnix and ConnectUnix: the one way Capsule's programs listen on and
// dial a unix stream socket (ttrpc, QMP, the vsock back ends, the agent's
// test endpoints, the pool, the shim's own socket). Listening binds a
// checked path, sets the file's mode before listen(2) so no client connects
// while it has the umask's permissions, and follows a chosen policy for a
// file already at the path. Dialing retries, with one back-off, while
// nothing accepts yet. CLOEXEC always.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule {

struct UnixListenOptions {
  // What to do with a file already at the path.
  enum class Existing {
    kRefuse,        // ALREADY_EXISTS
    kReplaceStale,  // replace a socket nobody accepts on; a live one is
                    // ALREADY_EXISTS, a file that is no socket FAILED_PRECONDITION
    kReplace,       // unlink it (the caller holds a lock that says it is ours)
  };
  mode_t mode = 0600;
  int backlog = SOMAXCONN;
  Existing existing = Existing::kRefuse;
  bool nonblocking = false;
  // Bind under a umask that leaves only `mode`: the socket is never, not
  // even for an instant, reachable with wider permissions. The umask is
  // process-wide, so only for a socket made before other threads create
  // files (the shim's own, at start); every other socket lives in a 0700 dir.
  bool restrict_umask_at_bind = false;
};

// INVALID_ARGUMENT for an empty path or one longer than sun_path allows.
Result<UniqueFd> ListenUnix(const std::string& path, const UnixListenOptions& options);

struct UnixConnectOptions {
  // How long to keep trying while nothing accepts at the path: the file is
  // missing (a server starting up), connects are refused (its socket file
  // appears at bind(2), a moment before listen(2): virtiofsd's does), or its
  // backlog is full. Zero: one try. Back-off from 1 ms, doubling, at most
  // 50 ms (containerd's dialer retries on a similar scale).
  std::chrono::milliseconds listen_wait{0};
  bool nonblocking = false;  // the connected socket's mode
};

// A CLOEXEC stream socket connected to `path`. UNAVAILABLE when nothing
// accepted within listen_wait (the message says for how long);
// INVALID_ARGUMENT for an empty or too long path; other errors as errno.
Result<UniqueFd> ConnectUnix(const std::string& path, const UnixConnectOptions& options = {});

}  // namespace capsule
