// pool_types.h <-> proto/capsule/pool/v1/pool.proto, in one place.
#pragma once

#include "capsule/pool/v1/pool.pb.h"
#include "runtime/pool/pool_types.h"

namespace capsule::pool {

v1::Shape ToProto(const Shape& s);
Shape FromProto(const v1::Shape& s);
v1::Claimant ToProto(const Claimant& c);
Claimant FromProto(const v1::Claimant& c);
void ToProto(const Claimed& c, v1::ClaimResponse* out);
Claimed FromProto(const v1::ClaimResponse& r);
v1::StatusResponse ToProto(const PoolStatus& s);
PoolStatus FromProto(const v1::StatusResponse& r);

}  // namespace capsule::pool
