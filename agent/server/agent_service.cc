// AgentService construction; the handlers live in rpc_*.cc.
#include "agent/server/agent_service.h"

namespace capsule::agent::server {

AgentService::AgentService(AgentServiceOptions options, pod::PodSlot* pods, AgentLifecycle* lifecycle)
    : options_(options), pods_(pods), lifecycle_(lifecycle), blocking_(options.max_blocking_calls) {}

}  // namespace capsule::agent::server
