// Field-by-field copies; IPAddress.Family V4/V6 <-> AF_INET/AF_INET6.
// Validation happens in agent/net.
#include "agent/server/convert_net.h"

namespace capsule::agent::server {
namespace {

int FamilyFromProto(v1::IPAddress::Family f) { return f == v1::IPAddress::V6 ? AF_INET6 : AF_INET; }
v1::IPAddress::Family FamilyToProto(int f) { return f == AF_INET6 ? v1::IPAddress::V6 : v1::IPAddress::V4; }

}  // namespace

net::Interface InterfaceFromProto(const v1::Interface& in) {
  net::Interface out;
  out.name = in.name();
  out.hw_addr = in.hw_addr();
  out.mtu = in.mtu();
  out.up = in.up();
  out.device_hint = in.device_hint();
  for (const auto& a : in.addresses()) out.addresses.push_back({FamilyFromProto(a.family()), a.address(), a.prefix_len()});
  return out;
}

v1::Interface InterfaceToProto(const net::Interface& in) {
  v1::Interface out;
  out.set_name(in.name);
  out.set_hw_addr(in.hw_addr);
  out.set_mtu(in.mtu);
  out.set_up(in.up);
  for (const auto& a : in.addresses) {
    v1::IPAddress* p = out.add_addresses();
    p->set_family(FamilyToProto(a.family));
    p->set_address(a.address);
    p->set_prefix_len(a.prefix_len);
  }
  return out;
}

std::vector<net::Route> RoutesFromProto(const v1::Routes& in) {
  std::vector<net::Route> out;
  for (const auto& r : in.routes()) {
    out.push_back({r.dest(), r.gateway(), r.device(), r.source(), r.scope(), FamilyFromProto(r.family())});
  }
  return out;
}

v1::Routes RoutesToProto(const std::vector<net::Route>& in) {
  v1::Routes out;
  for (const auto& r : in) {
    v1::Route* p = out.add_routes();
    p->set_dest(r.dest);
    p->set_gateway(r.gateway);
    p->set_device(r.device);
    p->set_source(r.source);
    p->set_scope(r.scope);
    p->set_family(FamilyToProto(r.family));
  }
  return out;
}

}  // namespace capsule::agent::server
