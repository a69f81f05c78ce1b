// Opening the host ends of a process's stdio: containerd's FIFOs, a log
// file, and writing to them without ever blocking forever.
//
// Output FIFOs are opened O_RDWR: the open cannot block or fail for want of
// a reader, and holding a read end ourselves means a reader that goes away
// (containerd restarting) never turns writes into EPIPE. Bytes then wait in
// the pipe for the next reader, as with containerd's runc shim, which opens
// both ends for the same reason. Stdin FIFOs are opened O_RDONLY|O_NONBLOCK:
// the open does not wait for a writer, and poll() reports nothing until a
// writer has come (and POLLHUP only after one came and went).
#pragma once

#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::shim::io {

// An output FIFO (or, like containerd, a regular file at that path, appended
// to). Non-blocking, CLOEXEC. NOT_FOUND when the path does not exist.
Result<UniqueFd> OpenOutputPath(const std::string& path);

// containerd's file:// output: parent directories created, O_APPEND|O_CREAT.
Result<UniqueFd> OpenOutputFile(const std::string& path);

// The stdin FIFO, read end, non-blocking.
Result<UniqueFd> OpenStdinFifo(const std::string& path);

// Writes all of `data` to non-blocking `fd`, waiting with poll() while the
// pipe is full. Returns CANCELLED as soon as `cancel_fd` becomes readable,
// and the errno status (EPIPE, ...) when the fd fails.
Status WriteAllOrCancel(int fd, std::string_view data, int cancel_fd);

}  // namespace capsule::shim::io
