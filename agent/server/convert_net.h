// protobuf <-> agent/net conversions for the network RPCs.
#pragma once

#include <vector>

#include "agent/net/types.h"
#include "capsule/agent/v1/agent.pb.h"

namespace capsule::agent::server {

namespace v1 = ::capsule::agent::v1;

net::Interface InterfaceFromProto(const v1::Interface& in);
v1::Interface InterfaceToProto(const net::Interface& in);
std::vector<net::Route> RoutesFromProto(const v1::Routes& in);
v1::Routes RoutesToProto(const std::vector<net::Route>& in);

}  // namespace capsule::agent::server
