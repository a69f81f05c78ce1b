// DestroySandbox: containers, then storages, go; with power_off the VM is
// switched off, but only after the reply has left: the power-off request is
// made from the reactor's OnDone, which gRPC calls once the final status has
// been handed to the transport.
#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"

namespace capsule::agent::server {

grpc::ServerUnaryReactor* AgentService::DestroySandbox(grpc::CallbackServerContext*,
                                                       const v1::DestroySandboxRequest* req, Empty*) {
  grpc::Status status = Guarded("DestroySandbox", [&]() -> Status { return pods_->Destroy(); });
  // The host asked for the VM to go away: power off even when the teardown
  // failed (the error is still reported), a half torn-down VM is no use.
  auto* reactor = new AfterAnswerReactor();
  if (req->power_off()) {
    reactor->after().Add([lifecycle = lifecycle_] { lifecycle->RequestPowerOff("DestroySandbox(power_off)"); });
  }
  reactor->Finish(status);
  return reactor;
}

}  // namespace capsule::agent::server
