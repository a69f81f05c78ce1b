// A connection of our own to a running VM's agent, for tools beside the
// VM's owner (metrics, capsule-runtime exec): the vsock host end is adopted
// only to dial through it and detached at once, so the owner keeps running
// it; the agent token comes from the VM's record. Nothing is taken over and
// no lock is taken.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "runtime/agentclient/agent_client.h"
#include "runtime/common/status.h"

namespace capsule::vm {

// `timeout` bounds the dial and check; `call_timeout` (default: `timeout`)
// is the deadline of the client's non-blocking calls, `signal_call_timeout`
// (default: `call_timeout`) that of its signals and window sizes.
Result<agentclient::AgentClientPtr> ConnectVmAgent(
    const std::string& state_dir, std::chrono::milliseconds timeout,
    std::optional<std::chrono::milliseconds> call_timeout = std::nullopt,
    std::optional<std::chrono::milliseconds> signal_call_timeout = std::nullopt);

}  // namespace capsule::vm
