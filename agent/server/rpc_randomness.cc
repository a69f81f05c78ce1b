// AddRandomness: reseeds the guest RNG so pooled or cloned VMs do not share
// a random state.
#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"
#include "agent/system/guest_system.h"

namespace capsule::agent::server {

grpc::Status AgentService::AddRandomness(Ctx*, const v1::AddRandomnessRequest* req, Empty*) {
  return Guarded("AddRandomness", [&]() -> Status { return system::AddEntropy(req->data()); });
}

}  // namespace capsule::agent::server
