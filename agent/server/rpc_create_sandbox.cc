// CreateSandbox: the pod's identity and storages arrive after boot (a pooled
// VM is booted before its pod exists).
#include "agent/server/agent_service.h"
#include "agent/server/convert.h"
#include "agent/server/rpc_util.h"

namespace capsule::agent::server {

grpc::Status AgentService::CreateSandbox(Ctx*, const v1::CreateSandboxRequest* req, Empty*) {
  return Guarded("CreateSandbox", [&]() -> Status { return pods_->Create(PodSpecFromProto(*req)).status(); });
}

}  // namespace capsule::agent::server
