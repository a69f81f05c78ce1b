// The shim's ttrpc socket: where it lives and how `start` claims it.
// The address is containerd's scheme (runtime/v2/shim/util_unix.go,
// SocketAddress): unix://<dir>/<sha256 hex of Join(containerd address, ns, group)>,
// so every container of a pod (same group) maps to one shim socket.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::shim::launcher {

// containerd 1.6 puts shim sockets here (defaults.DefaultStateDir + "/s").
inline constexpr std::string_view kDefaultSocketDir = "/run/containerd/s";
// Overrides kDefaultSocketDir for tests and non-standard installs.
inline constexpr const char* kSocketDirEnv = "CAPSULE_SHIM_SOCKET_DIR";
// Longest socket path containerd accepts (socketPathLimit in util_unix.go;
// sun_path holds 108 bytes).
inline constexpr size_t kSocketPathLimit = 106;
// How long CanConnect waits for a listener to answer.
inline constexpr int kConnectProbeTimeoutMs = 100;

// Go's filepath.Clean: "//a/./b/../c/" -> "/a/c", "" -> ".".
std::string CleanPath(std::string_view path);

// The directory for shim sockets: $CAPSULE_SHIM_SOCKET_DIR or the default.
std::string SocketDir();

// "unix://<socket_dir>/<hex sha256 of CleanPath(address/ns/group)>".
std::string SocketAddress(std::string_view containerd_address, std::string_view ns,
                          std::string_view group, std::string_view socket_dir);

// "unix:///x" -> "/x"; INVALID_ARGUMENT for other schemes or abstract sockets.
Result<std::string> SocketPathFromAddress(std::string_view address);

// True when something accepts connections on the unix socket at `path`.
bool CanConnect(const std::string& path);

// Creates the parent directory, binds and listens on `path` with `mode`
// (CLOEXEC). ALREADY_EXISTS when the path is taken (EADDRINUSE).
Result<UniqueFd> ListenUnix(const std::string& path, mode_t mode = 0600);

// The filesystem path a listening unix socket is bound to (getsockname).
Result<std::string> BoundPath(int fd);

}  // namespace capsule::shim::launcher
