// PoolClient: capsule-poold's API for the shim and capsule-runtime, over
// gRPC on the daemon's unix socket. No gRPC type crosses this header.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "runtime/common/status.h"
#include "runtime/pool/pool_types.h"

namespace capsule::pool {

struct ClaimReply {
  std::optional<Claimed> vm;  // nullopt: a miss
  std::string miss_reason;
};

class PoolClient {
 public:
  // Does not connect yet; every call has its own deadline. UNAVAILABLE
  // from a call means no daemon answers at `socket_path`.
  static std::unique_ptr<PoolClient> Create(const std::string& socket_path);
  ~PoolClient();
  PoolClient(const PoolClient&) = delete;
  PoolClient& operator=(const PoolClient&) = delete;

  Result<ClaimReply> Claim(const Shape& shape, const std::string& shape_key, const Claimant& who,
                           std::chrono::milliseconds timeout);
  Status Release(const std::string& vm_id, std::chrono::milliseconds timeout);
  Result<PoolStatus> GetStatus(std::chrono::milliseconds timeout);
  Status Resize(uint32_t size, std::chrono::milliseconds timeout);
  Result<uint32_t> Drain(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  explicit PoolClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsule::pool
