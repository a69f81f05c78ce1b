// SetupSandbox: a claimed VM's whole pod set-up in one round trip. Under
// TCG every guest round trip costs tens of milliseconds of a single vCPU;
// the five steps here used to be five calls, and the pod holder's
// adoption replaces a pause container's create and start. Under TCG a
// console line costs the guest about a ms, so the steps here log at debug
// level and the host logs the timings the response carries.
#include <fmt/format.h>

#include "agent/server/agent_service.h"
#include "agent/server/convert.h"
#include "agent/server/rpc_util.h"
#include "runtime/common/elapsed.h"
#include "runtime/common/logging.h"

namespace capsule::agent::server {
namespace {

const log::Logger kSetupSandboxLog("rpc");

// Less than this is no reseed worth the name (the host sends 512).
constexpr size_t kMinSetupRandomnessBytes = 32;

}  // namespace

grpc::Status AgentService::SetupSandbox(Ctx*, const v1::SetupSandboxRequest* req, v1::SetupSandboxResponse* resp) {
  return Guarded("SetupSandbox", [&]() -> Status {
    if (!req->has_time()) return InvalidArgument("time is required");
    if (!req->has_randomness() || req->randomness().data().size() < kMinSetupRandomnessBytes)
      return InvalidArgument(fmt::format("randomness: at least {} bytes are required, got {}",
                                         kMinSetupRandomnessBytes, req->randomness().data().size()));
    if (!req->has_sandbox()) return InvalidArgument("sandbox is required");
    using Steady = std::chrono::steady_clock;
    const auto t0 = Steady::now();
    RETURN_IF_ERROR_CTX(ApplyGuestTime(req->time()), "time");
    auto rng = ApplyRandomness(req->randomness());
    if (!rng.ok()) return std::move(rng).status().WithContext("randomness");
    *resp->mutable_randomness() = std::move(rng).value();
    const auto t_fresh = Steady::now();
    auto pod = pods_->Create(PodSpecFromProto(req->sandbox()));
    if (!pod.ok()) return std::move(pod).status().WithContext("sandbox");
    if (!req->holder_container_id().empty()) {
      RETURN_IF_ERROR(pod::CheckId("holder_container_id", req->holder_container_id()));
      auto pid = (*pod)->AdoptHolder(req->holder_container_id());
      if (!pid.ok()) return std::move(pid).status().WithContext("holder");
      resp->set_holder_pid(static_cast<uint32_t>(*pid));
    }
    const auto t_pod = Steady::now();
    for (int i = 0; i < req->interfaces_size(); ++i) {
      auto iface = ApplyInterface(req->interfaces(i));
      if (!iface.ok()) return std::move(iface).status().WithContext(fmt::format("interfaces[{}]", i));
      *resp->add_interfaces() = std::move(iface).value();
    }
    const auto t_nics = Steady::now();
    if (req->has_routes()) {
      auto routes = ApplyRoutes(req->routes());
      if (!routes.ok()) return std::move(routes).status().WithContext("routes");
      *resp->mutable_routes() = std::move(routes).value();
    }
    // What each part costs the guest goes back to the host, which logs it
    // (pod_start_bench's breakdown): the guest logs no line on this path.
    const auto t_end = Steady::now();
    resp->set_handled_us(MicrosField(MsBetween(t0, t_end)));
    resp->set_clock_rng_us(MicrosField(MsBetween(t0, t_fresh)));
    resp->set_pod_us(MicrosField(MsBetween(t_fresh, t_pod)));
    resp->set_nics_us(MicrosField(MsBetween(t_pod, t_nics)));
    resp->set_routes_us(MicrosField(MsBetween(t_nics, t_end)));
    kSetupSandboxLog.Debug("sandbox {} set up in {:.1f} ms", req->sandbox().sandbox_id(),
                           MsOfMicrosField(resp->handled_us()));
    return Status::Ok();
  });
}

}  // namespace capsule::agent::server
