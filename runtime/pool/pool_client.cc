// See pool_client.h.
#include "runtime/pool/pool_client.h"

#include <grpcpp/grpcpp.h>

#include <fmt/format.h>

#include "capsule/pool/v1/pool.grpc.pb.h"
#include "runtime/common/grpc_status.h"
#include "runtime/pool/pool_convert.h"

namespace capsule::pool {
namespace {

Status FromGrpc(const grpc::Status& s, std::string_view what) {
  return FromGrpcStatus(s, fmt::format("pool {}: {}", what, s.error_message()));
}

}  // namespace

struct PoolClient::Impl {
  std::string socket;
  std::unique_ptr<v1::Pool::Stub> stub;

  template <typename Req, typename Resp, typename Fn>
  Result<Resp> Call(std::string_view what, const Req& req, std::chrono::milliseconds timeout, Fn fn) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    Resp resp;
    grpc::Status s = (stub.get()->*fn)(&ctx, req, &resp);
    if (!s.ok()) return FromGrpc(s, fmt::format("{} at {}", what, socket));
    return resp;
  }
};

PoolClient::PoolClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PoolClient::~PoolClient() = default;

std::unique_ptr<PoolClient> PoolClient::Create(const std::string& socket_path) {
  auto impl = std::make_unique<Impl>();
  impl->socket = socket_path;
  grpc::ChannelArguments args;
  // A missing daemon must answer at once, not after gRPC's reconnect back-off.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  impl->stub = v1::Pool::NewStub(grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args));
  return std::unique_ptr<PoolClient>(new PoolClient(std::move(impl)));
}

Result<ClaimReply> PoolClient::Claim(const Shape& shape, const std::string& shape_key, const Claimant& who,
                                     std::chrono::milliseconds timeout) {
  v1::ClaimRequest req;
  *req.mutable_shape() = ToProto(shape);
  *req.mutable_claimant() = ToProto(who);
  req.set_shape_key(shape_key);
  ASSIGN_OR_RETURN(v1::ClaimResponse resp,
                   (impl_->Call<v1::ClaimRequest, v1::ClaimResponse>("Claim", req, timeout, &v1::Pool::Stub::Claim)));
  ClaimReply out;
  if (!resp.ready()) {
    out.miss_reason = resp.miss_reason().empty() ? "the pool answered a miss without a reason" : resp.miss_reason();
    return out;
  }
  out.vm = FromProto(resp);
  return out;
}

Status PoolClient::Release(const std::string& vm_id, std::chrono::milliseconds timeout) {
  v1::ReleaseRequest req;
  req.set_vm_id(vm_id);
  return impl_->Call<v1::ReleaseRequest, v1::ReleaseResponse>("Release", req, timeout, &v1::Pool::Stub::Release)
      .status();
}

Result<PoolStatus> PoolClient::GetStatus(std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(v1::StatusResponse resp, (impl_->Call<v1::StatusRequest, v1::StatusResponse>(
                                                "Status", v1::StatusRequest(), timeout, &v1::Pool::Stub::Status)));
  return FromProto(resp);
}

Status PoolClient::Resize(uint32_t size, std::chrono::milliseconds timeout) {
  v1::ResizeRequest req;
  req.set_size(size);
  return impl_->Call<v1::ResizeRequest, v1::ResizeResponse>("Resize", req, timeout, &v1::Pool::Stub::Resize).status();
}

Result<uint32_t> PoolClient::Drain(std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(v1::DrainResponse resp, (impl_->Call<v1::DrainRequest, v1::DrainResponse>(
                                               "Drain", v1::DrainRequest(), timeout, &v1::Pool::Stub::Drain)));
  return resp.stopped();
}

}  // namespace capsule::pool
