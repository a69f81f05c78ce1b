// AddRandomness: reseeds the guest RNG so pooled or cloned VMs do not share
// a random state, and counts what it applied so the host can tell (and a
// test can check) that a claimed VM was reseeded.
#include <atomic>

#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"
#include "agent/system/guest_system.h"

namespace capsule::agent::server {
namespace {

std::atomic<uint64_t> g_reseeds{0};
std::atomic<uint64_t> g_bytes_added{0};

}  // namespace

Result<v1::AddRandomnessResponse> AgentService::ApplyRandomness(const v1::AddRandomnessRequest& req) const {
  RETURN_IF_ERROR(system::AddEntropy(req.data()));
  v1::AddRandomnessResponse resp;
  resp.set_reseeds(++g_reseeds);
  resp.set_bytes_added(g_bytes_added += req.data().size());
  return resp;
}

grpc::Status AgentService::AddRandomness(Ctx*, const v1::AddRandomnessRequest* req, v1::AddRandomnessResponse* resp) {
  return Guarded("AddRandomness", [&]() -> Status {
    ASSIGN_OR_RETURN(*resp, ApplyRandomness(*req));
    return Status::Ok();
  });
}

}  // namespace capsule::agent::server
