// What the launcher asks of the layers above it: the daemon's serve loop
// (the ttrpc Task service) and the VM clean-up that `delete` runs after a
// shim died. shim/cmd/shimd_main.cc wires the real ones into capsule-shimd,
// shim/cmd/shim_main.cc none into containerd-shim-capsule-v2 (it runs
// capsule-shimd for them); tests plug in their own.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::shim::launcher {

// A one-shot "the daemon should exit" flag: set by SIGTERM/SIGINT, or by the
// service (containerd's Shutdown when no container is left).
class ShutdownSignal {
 public:
  // The first reason wins; later calls are no-ops.
  void Request(std::string reason);
  bool requested() const;
  // Blocks until requested; returns the reason.
  std::string Wait();
  // Waits up to `timeout`; true once requested.
  bool WaitFor(std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool requested_ = false;  // guarded by mu_
  std::string reason_;      // guarded by mu_
};

// Everything the serving daemon knows about itself.
struct DaemonContext {
  std::string ns;                  // containerd namespace
  std::string id;                  // id of the task that started the shim
  std::string bundle;              // that task's bundle (the working dir)
  std::string containerd_address;  // containerd's gRPC socket
  std::string ttrpc_address;       // $TTRPC_ADDRESS: containerd's ttrpc socket (events)
  std::string publish_binary;
  std::string config_path;         // runtimeoptions ConfigPath; empty: default
  bool debug = false;
  std::string socket_path;         // where listen_fd is bound
  UniqueFd listen_fd;              // listening, CLOEXEC; serve takes it
  ShutdownSignal* shutdown = nullptr;  // owned by the launcher; outlives serve
};

// Serves on ctx.listen_fd until ctx.shutdown is requested (a signal or the
// service's own Shutdown), then stops serving and returns. A non-OK status
// makes the daemon exit 1 after logging it.
using ServeFn = std::function<Status(DaemonContext& ctx)>;

struct CleanupContext {
  std::string ns;
  std::string id;
  std::string bundle;
  std::string containerd_address;
};

// Force-stops and tears down what a dead shim left for task `id` (VM,
// mounts, state dirs). Returns the pid to report in DeleteResponse: the
// recorded VMM pid, or 0 when none is known.
using CleanupFn = std::function<Result<uint32_t>(const CleanupContext& ctx)>;

struct Hooks {
  ServeFn serve;      // the daemon's; unset where daemon_exe serves
  CleanupFn cleanup;  // optional; unset reports pid 0 (or runs daemon_exe's)
  // The binary holding the two above when this one does not ("" = this
  // one): `start` spawns it as the daemon, and a `delete` with clean-up to
  // do (the group's daemon is gone) runs as it. containerd runs the shim
  // binary for every task's start and delete; one without gRPC, QEMU and
  // netlink libraries loads in ~2 ms instead of ~10.
  std::string daemon_exe;
};

}  // namespace capsule::shim::launcher
