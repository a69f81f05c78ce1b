// capsule-vsockd: the per-VM vhost-user-vsock back end process. It serves
// one VM until QEMU disconnects or SIGTERM/SIGINT arrives, then removes its
// sockets and pid file and exits 0. Running apart from the shim lets a VM
// outlive the process that booted it (the warm pool hands VMs over).
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "runtime/vsock/vsock_service.h"

namespace capsule::vsock {

struct VsockdOptions {
  VsockServiceOptions service;
  // When >= 0: "READY\n" is written and the fd closed once both sockets
  // accept, so a launcher knows QEMU may start.
  int ready_fd = -1;
  std::string pid_file;  // written at start, removed at exit ("" = none)
};

// Serves until QEMU leaves or a termination signal; the loop owns the thread.
Status RunVsockd(const VsockdOptions& options);

// The command line front end: parses argv, runs, returns the exit code.
int VsockdMain(int argc, char** argv);

}  // namespace capsule::vsock
