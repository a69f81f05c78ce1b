// Version: who answers (agent build, API revision, guest kernel) and when it
// became ready, for the host's boot-time measurements.
#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"
#include "agent/system/guest_system.h"
#include "runtime/common/guest_abi.h"
#include "runtime/common/version.h"

namespace capsule::agent::server {

grpc::Status AgentService::Version(Ctx*, const v1::VersionRequest*, v1::VersionResponse* resp) {
  return Guarded("Version", [&]() -> Status {
    resp->set_agent_version(kVersion);
    resp->set_api_version(guest_abi::kAgentApiVersion);
    resp->set_kernel_release(system::KernelRelease());
    resp->set_ready_monotonic_us(lifecycle_->ready_monotonic_us());
    return Status::Ok();
  });
}

}  // namespace capsule::agent::server
