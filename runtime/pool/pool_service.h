// The Pool gRPC service: one thin handler per RPC over WarmPool (validate,
// convert, call, map the error).
#pragma once

#include <grpcpp/grpcpp.h>

#include "capsule/pool/v1/pool.grpc.pb.h"
#include "runtime/pool/warm_pool.h"

namespace capsule::pool {

class PoolService final : public ::capsule::pool::v1::Pool::Service {
 public:
  explicit PoolService(WarmPool* pool) : pool_(pool) {}

  grpc::Status Claim(grpc::ServerContext*, const v1::ClaimRequest*, v1::ClaimResponse*) override;
  grpc::Status Release(grpc::ServerContext*, const v1::ReleaseRequest*, v1::ReleaseResponse*) override;
  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*, v1::StatusResponse*) override;
  grpc::Status Resize(grpc::ServerContext*, const v1::ResizeRequest*, v1::ResizeResponse*) override;
  grpc::Status Drain(grpc::ServerContext*, const v1::DrainRequest*, v1::DrainResponse*) override;

 private:
  WarmPool* pool_;
};

}  // namespace capsule::pool
