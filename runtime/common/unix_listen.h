// ListenUnix: the one way Capsule's programs listen on a unix stream socket
// (ttrpc, QMP, the vsock back end, the pool, the shim's own socket): bind
// with a checked path, the file's mode set before listen(2) so no client
// connects while it has the umask's permissions, and a chosen policy for a
// file already at the path. CLOEXEC always.
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

// A blocking, CLOEXEC stream socket connected to `path` (a unix connect
// completes or fails at once). UNAVAILABLE when nothing listens there,
// after retrying for `listen_wait`: a server's socket file appears at its
// bind(2), a moment before its listen(2) (virtiofsd's does, and we wait
// for that file), and connects in between are refused.
Result<UniqueFd> ConnectUnix(const std::string& path,
                             std::chrono::milliseconds listen_wait = std::chrono::milliseconds(0));

}  // namespace capsule
