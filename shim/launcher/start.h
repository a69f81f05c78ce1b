// `start`: find or create the pod's shim daemon and return its address.
// containerd execs `<shim> ... start` in the bundle, reads stdout+stderr
// together as the address, and connects to it. So start prints only the
// address, and the daemon it forks keeps none of start's stdio.
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "shim/launcher/flags.h"

namespace capsule::shim::launcher {

struct StartRequest {
  ShimFlags flags;
  std::string bundle;        // absolute; the working dir when -bundle is absent
  std::string options;       // bytes of start's stdin (a google.protobuf.Any)
  std::string socket_dir;    // where shim sockets live (SocketDir())
  std::string daemon_exe;    // the binary to exec as the daemon
};

// Returns the "unix://..." address of the group's daemon: an existing one
// that accepts connections, or a new one listening on a socket created here
// and inherited by the daemon. Writes <bundle>/address either way. On error
// nothing is left behind (no socket, no daemon).
Result<std::string> StartShim(const StartRequest& request);

}  // namespace capsule::shim::launcher
