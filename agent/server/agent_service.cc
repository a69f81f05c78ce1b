// AgentService construction and engine wiring; the handlers live in rpc_*.cc.
#include "agent/server/agent_service.h"

namespace capsule::agent::server {

AgentService::AgentService(AgentServiceOptions options, sandbox::SandboxManager* sandboxes,
                           AgentLifecycle* lifecycle)
    : options_(options), sandboxes_(sandboxes), lifecycle_(lifecycle), blocking_(options.max_blocking_calls) {}

void AgentService::SetContainerOps(ContainerOps* ops) {
  containers_.store(ops);
  sandboxes_->SetObserver(ops);
}

}  // namespace capsule::agent::server
