// Relay: bytes both ways between two connected stream sockets, the way a
// TCP proxy passes them on. Each direction ends at its reader's EOF, which
// is passed on as shutdown(SHUT_WR) of the other socket (half-close keeps
// working through the relay); an error or reset on one side resets the
// other (ResetOnClose), so the far peer sees a reset too and not a clean
// end. Used by the shim's port-forward listener (pod netns <-> vsock) and by
// the agent's forwarder (vsock <-> the guest's loopback).
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule {

struct RelayStats {
  uint64_t a_to_b = 0;
  uint64_t b_to_a = 0;
};

// Returns once both directions ended (OK), one side failed (UNAVAILABLE
// naming it: "<what>: <side a|b>: ..."), or `stop_fd` (when >= 0) became
// readable (CANCELLED). Both sockets are made non-blocking; the caller
// still owns and closes them. `stats`, when given, holds the bytes moved
// whatever the outcome.
Status Relay(int a, int b, int stop_fd, std::string_view what, RelayStats* stats = nullptr);

// SO_LINGER {on, 0}: closing `fd` sends a TCP RST instead of a FIN. Best
// effort (a unix or vsock stream just closes).
void ResetOnClose(int fd);

}  // namespace capsule
