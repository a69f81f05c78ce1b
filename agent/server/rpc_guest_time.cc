// SetGuestTime: the wall clock of a VM that was booted ahead (pool) or
// restored from a snapshot is stale; the host sets it at claim time.
#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"
#include "agent/system/guest_system.h"

namespace capsule::agent::server {

Status AgentService::ApplyGuestTime(const v1::SetGuestTimeRequest& req) const {
  RETURN_IF_ERROR(system::ValidateTime(req.seconds(), req.nanos()));
  if (!options_.may_set_clock) {
    return FailedPrecondition("the agent runs as a host process (--no-init): refusing to set the host's clock");
  }
  return system::SetRealtimeClock(req.seconds(), req.nanos());
}

grpc::Status AgentService::SetGuestTime(Ctx*, const v1::SetGuestTimeRequest* req, Empty*) {
  return Guarded("SetGuestTime", [&]() -> Status { return ApplyGuestTime(*req); });
}

}  // namespace capsule::agent::server
