// Guest network RPCs: the host mirrors the pod's CNI result (links,
// addresses, routes) into the VM. Checks and netlink live in agent/net.
#include "agent/server/agent_service.h"
#include "agent/server/convert_net.h"
#include "agent/server/rpc_util.h"

namespace capsule::agent::server {
namespace {

// Runs `fn(network)` returning Result<Resp>, UNIMPLEMENTED without a network.
template <typename Resp, typename Fn>
grpc::Status NetCall(std::string_view rpc, net::Network* network, Resp* out, Fn&& fn) {
  return Guarded(rpc, [&]() -> Status {
    if (network == nullptr) return Unimplemented(std::string(rpc) + ": this agent manages no network");
    ASSIGN_OR_RETURN(*out, fn(*network));
    return Status::Ok();
  });
}

}  // namespace

grpc::Status AgentService::UpdateInterface(Ctx*, const v1::UpdateInterfaceRequest* req, v1::Interface* resp) {
  return NetCall("UpdateInterface", network_, resp, [&](net::Network& n) -> Result<v1::Interface> {
    if (!req->has_interface()) return InvalidArgument("interface is required");
    ASSIGN_OR_RETURN(net::Interface updated, n.UpdateInterface(InterfaceFromProto(req->interface())));
    return InterfaceToProto(updated);
  });
}

grpc::Status AgentService::UpdateRoutes(Ctx*, const v1::UpdateRoutesRequest* req, v1::Routes* resp) {
  return NetCall("UpdateRoutes", network_, resp, [&](net::Network& n) -> Result<v1::Routes> {
    ASSIGN_OR_RETURN(std::vector<net::Route> routes, n.UpdateRoutes(RoutesFromProto(req->routes())));
    return RoutesToProto(routes);
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
