// Unix stream sockets for ttrpc: listen on a path with a given mode, ask a
// peer's uid. Dialing is runtime/common/unix_stream.h's ConnectUnix.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::ttrpc {

// "unix:///run/x.sock" -> "/run/x.sock"; a plain path is returned as is.
std::string StripUnixScheme(std::string_view address);

// Binds `path` (which must not exist), applies `mode` before listen(2) so no
// client can connect while the socket has the umask's permissions.
Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode);

// SO_PEERCRED uid of a connected unix socket.
Result<uid_t> PeerUid(int fd);

// True when `fd` is a listening socket (SO_ACCEPTCONN).
bool IsListeningSocket(int fd);

}  // namespace capsule::ttrpc
