// What the launcher reads from and writes to a container's bundle directory:
// the shim group from config.json's annotations, the `address` file that
// tells containerd (and later starts) where the shim listens, the `log` FIFO.
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::shim::launcher {

// Annotations that put containers into one shim, first match wins
// (containerd's runc manager uses the same CRI key).
inline constexpr const char* kSandboxIdAnnotation = "io.kubernetes.cri.sandbox-id";
inline constexpr const char* kAddressFile = "address";
inline constexpr const char* kLogFifo = "log";

// The group id for the container `id` in `bundle`: its pod's sandbox id when
// config.json carries one, else `id` itself. Errors name the file.
Result<std::string> ShimGroup(const std::string& bundle, const std::string& id);

// <bundle>/address, written atomically (containerd reads it on restore).
Status WriteAddressFile(const std::string& bundle, const std::string& address);
// NOT_FOUND when absent; INVALID_ARGUMENT when empty.
Result<std::string> ReadAddressFile(const std::string& bundle);
// The socket path of <bundle>/address; the address file's or the
// address's error when it has none.
Result<std::string> GroupSocketPath(const std::string& bundle);
// Whether the task's group lives on and cleans up after its own tasks: the
// daemon its bundle record names still runs (checked through the pid-reuse
// guard), or, without such a record, the socket at <bundle>/address still
// takes connects. The daemon is asked first because a child it forked and
// had not exec'd yet holds a copy of its socket a moment after the daemon
// was killed, and containerd runs `delete` at once.
bool GroupStillServed(const std::string& bundle);

// Opens <bundle>/log for writing without blocking: O_WRONLY when containerd
// holds the read end, else O_RDWR so lines wait in the pipe for a reader
// that comes later. Non-blocking either way: a full pipe drops log lines
// rather than stalling the shim. NOT_FOUND when there is no log FIFO.
Result<UniqueFd> OpenLogFifo(const std::string& bundle);

// The absolute working directory.
Result<std::string> WorkingDir();

}  // namespace capsule::shim::launcher
