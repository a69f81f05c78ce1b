// Helpers every handler uses: the reply (grpc_status.h) with its log line, and a guard
// that turns an escaping exception into INTERNAL instead of a dead PID 1.
#pragma once

#include <grpcpp/grpcpp.h>

#include <exception>
#include <string_view>

#include "agent/server/container_ops.h"
#include "runtime/common/grpc_status.h"
#include "runtime/common/status.h"

namespace capsule::agent::server {

// Logs failures (warn for the caller's mistakes, error for ours) and returns
// the gRPC status for `rpc`.
grpc::Status Reply(std::string_view rpc, const Status& status);

// Runs `fn` (returning Status); exceptions become INTERNAL.
template <typename Fn>
grpc::Status Guarded(std::string_view rpc, Fn&& fn) {
  Status status;
  try {
    status = fn();
  } catch (const std::exception& e) {
    status = Internal(std::string(rpc) + ": unexpected exception: " + e.what());
  } catch (...) {
    status = Internal(std::string(rpc) + ": unexpected exception");
  }
  return Reply(rpc, status);
}

// The reactor of a callback-API unary RPC whose answer some work must
// follow: what is added to after() runs in OnDone. gRPC's callback API owns
// reactors by raw pointer until OnDone, where the reactor deletes itself;
// that is the documented pattern, not ours to change.
class AfterAnswerReactor final : public grpc::ServerUnaryReactor {
 public:
  AfterAnswer& after() { return after_; }
  void OnDone() override {
    after_.Run();
    delete this;
  }
  void OnCancel() override {}

 private:
  AfterAnswer after_;
};

// CallContext over a gRPC server context.
class GrpcCallContext final : public CallContext {
 public:
  explicit GrpcCallContext(const grpc::ServerContextBase* ctx) : ctx_(ctx) {}
  bool cancelled() const override { return ctx_->IsCancelled(); }

 private:
  const grpc::ServerContextBase* ctx_;
};

}  // namespace capsule::agent::server
