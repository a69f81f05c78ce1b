// A connection of our own to a running VM's agent, for tools beside the
// VM's owner (metrics, capsule-runtime exec): the vsock host end is adopted
// only to dial through it and detached at once, so the owner keeps running
// it; the agent token comes from the VM's record. Nothing is taken over and
// no lock is taken.
#pragma once

#include <chrono>
#include <string>

#include "runtime/agentclient/agent_client.h"
#include "runtime/common/status.h"

namespace capsule::vm {

// `timeout` bounds the dial and check, and is the default deadline of the
// client's non-blocking calls.
Result<agentclient::AgentClientPtr> ConnectVmAgent(const std::string& state_dir, std::chrono::milliseconds timeout);

}  // namespace capsule::vm
