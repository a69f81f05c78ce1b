// Guest network RPCs: the host mirrors the pod's CNI result (links,
// addresses, routes) into the VM. Checks and netlink live in agent/net.
#include "agent/server/agent_service.h"
#include "agent/server/convert_net.h"
#include "agent/server/rpc_util.h"

namespace capsule::agent::server {
namespace {

Status NoNetwork(std::string_view rpc) {
  return Unimplemented(std::string(rpc) + ": this agent manages no network");
}

// Runs `fn(network)` returning Result<Resp>, UNIMPLEMENTED without a network.
template <typename Resp, typename Fn>
grpc::Status NetCall(std::string_view rpc, net::Network* network, Resp* out, Fn&& fn) {
  return Guarded(rpc, [&]() -> Status {
    if (network == nullptr) return NoNetwork(rpc);
    ASSIGN_OR_RETURN(*out, fn(*network));
    return Status::Ok();
  });
}

}  // namespace

Result<v1::Interface> AgentService::ApplyInterface(const v1::Interface& iface) const {
  if (network_ == nullptr) return NoNetwork("UpdateInterface");
  ASSIGN_OR_RETURN(net::Interface updated, network_->UpdateInterface(InterfaceFromProto(iface)));
  return InterfaceToProto(updated);
}

Result<v1::Routes> AgentService::ApplyRoutes(const v1::Routes& routes) const {
  if (network_ == nullptr) return NoNetwork("UpdateRoutes");
  ASSIGN_OR_RETURN(std::vector<net::Route> applied, network_->UpdateRoutes(RoutesFromProto(routes)));
  return RoutesToProto(applied);
}

grpc::Status AgentService::UpdateInterface(Ctx*, const v1::UpdateInterfaceRequest* req, v1::Interface* resp) {
  return Guarded("UpdateInterface", [&]() -> Status {
    if (!req->has_interface()) return InvalidArgument("interface is required");
    ASSIGN_OR_RETURN(*resp, ApplyInterface(req->interface()));
    return Status::Ok();
  });
}

grpc::Status AgentService::UpdateRoutes(Ctx*, const v1::UpdateRoutesRequest* req, v1::Routes* resp) {
  return Guarded("UpdateRoutes", [&]() -> Status {
    ASSIGN_OR_RETURN(*resp, ApplyRoutes(req->routes()));
    return Status::Ok();
  });
}

grpc::Status AgentService::ListInterfaces(Ctx*, const v1::ListInterfacesRequest*, v1::Interfaces* resp) {
  return NetCall("ListInterfaces", network_, resp, [&](net::Network& n) -> Result<v1::Interfaces> {
    ASSIGN_OR_RETURN(std::vector<net::Interface> list, n.ListInterfaces());
    v1::Interfaces out;
    for (const auto& i : list) *out.add_interfaces() = InterfaceToProto(i);
    return out;
  });
}

grpc::Status AgentService::ListRoutes(Ctx*, const v1::ListRoutesRequest*, v1::Routes* resp) {
  return NetCall("ListRoutes", network_, resp, [&](net::Network& n) -> Result<v1::Routes> {
    ASSIGN_OR_RETURN(std::vector<net::Route> routes, n.ListRoutes());
    return RoutesToProto(routes);
  });
}

}  // namespace capsule::agent::server
