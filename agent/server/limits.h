// Thread budget of the agent's synchronous gRPC server. Every call holds a
// server thread while its handler runs; the blocking ones (WaitProcess,
// ReadStdout, ReadStderr, WriteStdin, GetOOMEvent) hold it until a process
// exits, writes, reads or is OOM-killed: a shim keeps up to three of them
// per process (wait + two output streams) plus one GetOOMEvent per pod.
//
// gRPC's sync server answers RESOURCE_EXHAUSTED for any call once its
// thread quota is used up, so if blocking calls could take every thread,
// the very calls that unblock them (SignalProcess, CloseStdin,
// RemoveContainer) could no longer run: a pod would wedge. Hence two
// limits: at most `max_blocking_calls` blocking calls are admitted at once
// (more are answered RESOURCE_EXHAUSTED at once, naming the limit), and
// the thread quota is that plus `reserved_threads` for all other calls
// plus gRPC's own pollers. With the defaults a pod can stream stdio of
// ~340 processes at once; non-blocking calls always find a thread unless
// more than 64 of them run at the same moment.
#pragma once

#include <cstdint>

namespace capsule::agent::server {

inline constexpr uint32_t kDefaultMaxBlockingCalls = 1024;
inline constexpr uint32_t kDefaultReservedThreads = 64;
// gRPC sync server poller threads (ServerBuilder MIN_POLLERS/MAX_POLLERS).
// A blocking call keeps the poller that took it, and gRPC starts another
// thread to poll. These were raised from gRPC's 1-2 while chasing calls
// that sat unread in the guest for 50-100 ms after a pair of blocking
// calls; that turned out to have two other causes, both fixed outside the
// agent: the shim sent a container's output long-polls between its create
// and its start (the start took twice as long; now they follow the start),
// and pooled VMs were paused with guest work still due, which ran when a
// pod resumed them (the pool now lets a VM go quiet first). Moving blocking
// calls off gRPC's threads altogether (callback methods on a pool of our
// own) was tried and changed nothing measurable, so it was not kept. These
// values have not been measured against gRPC's defaults since. Idle
// pollers cost only the stack pages they touched.
inline constexpr int kMinPollers = 8;
inline constexpr int kMaxPollers = 10;
// Every stream's fixed flow-control window: gRPC's default largest message
// a server takes (4 MiB), so no message waits on a window update.
inline constexpr int kStreamWindowBytes = 4 << 20;

struct ServerLimits {
  uint32_t max_blocking_calls = kDefaultMaxBlockingCalls;
  uint32_t reserved_threads = kDefaultReservedThreads;
  // The ResourceQuota's thread limit.
  int MaxThreads() const { return static_cast<int>(max_blocking_calls + reserved_threads) + kMaxPollers; }
};

}  // namespace capsule::agent::server
