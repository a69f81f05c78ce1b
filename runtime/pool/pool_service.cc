// See pool_service.h.
#include "runtime/pool/pool_service.h"

#include "runtime/common/file_util.h"
#include "runtime/common/grpc_status.h"
#include "runtime/pool/pool_convert.h"

namespace capsule::pool {
namespace {

// Largest pool a Resize may ask for: each VM is a booted guest.
constexpr uint32_t kMaxSize = 1024;

std::string KsmState() {
  auto run = ReadFile("/sys/kernel/mm/ksm/run");
  if (!run.ok()) return "";
  std::string s = *run;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s == "1" ? "running" : s == "0" ? "stopped" : s == "2" ? "unmerging" : s;
}

}  // namespace

grpc::Status PoolService::Claim(grpc::ServerContext*, const v1::ClaimRequest* req, v1::ClaimResponse* resp) {
  if (req->claimant().sandbox_id().empty())
    return ToGrpcStatus(InvalidArgument("claimant.sandbox_id is empty"));
  const Shape shape = Resolve(pool_->config(), FromProto(req->shape()));
  auto key = ShapeKey(pool_->config(), shape);
  if (!key.ok()) return ToGrpcStatus(key.status());
  if (!req->shape_key().empty() && req->shape_key() != *key) {
    resp->set_ready(false);
    resp->set_miss_reason("the pool's VMs of " + Describe(shape) + " have shape key " + *key + ", the claimant wants " +
                          req->shape_key() + " (a different kernel, initrd, QEMU or setting)");
    return grpc::Status::OK;
  }
  std::string miss;
  auto claimed = pool_->Claim(shape, FromProto(req->claimant()), &miss);
  if (!claimed.ok()) return ToGrpcStatus(claimed.status());
  if (!claimed->has_value()) {
    resp->set_ready(false);
    resp->set_miss_reason(miss);
    return grpc::Status::OK;
  }
  ToProto(**claimed, resp);
  return grpc::Status::OK;
}

grpc::Status PoolService::Release(grpc::ServerContext*, const v1::ReleaseRequest* req, v1::ReleaseResponse*) {
  return ToGrpcStatus(pool_->Release(req->vm_id()));
}

grpc::Status PoolService::Status(grpc::ServerContext*, const v1::StatusRequest*, v1::StatusResponse* resp) {
  PoolStatus st = pool_->GetStatus();
  st.ksm = KsmState();
  *resp = ToProto(st);
  return grpc::Status::OK;
}

grpc::Status PoolService::Resize(grpc::ServerContext*, const v1::ResizeRequest* req, v1::ResizeResponse*) {
  if (req->size() > kMaxSize)
    return ToGrpcStatus(InvalidArgument("size " + std::to_string(req->size()) + " is more than " + std::to_string(kMaxSize)));
  pool_->Resize(req->size());
  return grpc::Status::OK;
}

grpc::Status PoolService::Drain(grpc::ServerContext*, const v1::DrainRequest*, v1::DrainResponse* resp) {
  resp->set_stopped(pool_->Drain());
  return grpc::Status::OK;
}

}  // namespace capsule::pool
