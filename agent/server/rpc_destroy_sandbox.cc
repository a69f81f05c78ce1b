// DestroySandbox: containers, then storages, go; with power_off the VM is
// switched off, but only after the reply has left: the power-off request is
// made from the reactor's OnDone, which gRPC calls once the final status has
// been handed to the transport.
#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"
#include "runtime/common/logging.h"

namespace capsule::agent::server {
namespace {

// gRPC's callback API owns reactors by raw pointer until OnDone, where the
// reactor deletes itself; this is the documented pattern, not ours to change.
class DestroyReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit DestroyReactor(AgentLifecycle* power_off) : power_off_(power_off) {}

  void OnDone() override {
    if (power_off_ != nullptr) power_off_->RequestPowerOff("DestroySandbox(power_off)");
    delete this;
  }
  void OnCancel() override {}

 private:
  AgentLifecycle* power_off_;  // null: no power-off
};

}  // namespace

grpc::ServerUnaryReactor* AgentService::DestroySandbox(grpc::CallbackServerContext*,
                                                       const v1::DestroySandboxRequest* req, Empty*) {
  grpc::Status status = Guarded("DestroySandbox", [&]() -> Status { return pods_->Destroy(); });
  // The host asked for the VM to go away: power off even when the teardown
  // failed (the error is still reported), a half torn-down VM is no use.
  auto* reactor = new DestroyReactor(req->power_off() ? lifecycle_ : nullptr);
  reactor->Finish(status);
  return reactor;
}

}  // namespace capsule::agent::server
