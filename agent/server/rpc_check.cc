// Check: gRPC health-check semantics. "" or the Agent service -> SERVING
// (NOT_SERVING once the agent is shutting down); anything else NOT_FOUND.
#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"

namespace capsule::agent::server {

grpc::Status AgentService::Check(Ctx*, const v1::CheckRequest* req, v1::CheckResponse* resp) {
  return Guarded("Check", [&]() -> Status {
    if (!req->service().empty() && req->service() != kServiceName) {
      return NotFound("service '" + req->service() + "' is not served here (only " + kServiceName + ")");
    }
    resp->set_status(lifecycle_->shutting_down() ? v1::CheckResponse::NOT_SERVING : v1::CheckResponse::SERVING);
    return Status::Ok();
  });
}

}  // namespace capsule::agent::server
