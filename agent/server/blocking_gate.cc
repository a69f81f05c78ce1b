// Lock-free slot counting: a failed admission gives its increment back.
#include "agent/server/blocking_gate.h"

#include <fmt/format.h>

namespace capsule::agent::server {

Result<BlockingGate::Slot> BlockingGate::Enter(std::string_view rpc) {
  if (in_use_.fetch_add(1) >= limit_) {
    in_use_.fetch_sub(1);
    return ResourceExhausted(fmt::format(
        "{}: {} blocking calls (WaitProcess, ReadStdout, ReadStderr, WriteStdin, GetOOMEvent) are already in flight, "
        "the agent's limit (--max-blocking-calls); finish or cancel some first",
        rpc, limit_));
  }
  return Slot(&in_use_);
}

}  // namespace capsule::agent::server
