// Container consoles. The pty is created by the container process inside
// its own mount namespace (its devpts instance), so the terminal belongs to
// the container; the master fd travels back to the agent over the sync
// socket. Window size from the spec's consoleSize, later TtyWinResize.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

// Child side, after setsid(): opens /dev/ptmx, makes the slave the
// controlling terminal and fds 0, 1, 2, and returns the master.
Result<UniqueFd> SetupConsole(const std::optional<oci::ConsoleSize>& size);

Status ResizeTerminal(int master_fd, uint32_t rows, uint32_t cols);

// Child side, pipes mode: makes the three fds the process's 0, 1, 2.
Status DupStdio(int in, int out, int err);

}  // namespace capsule::engine
