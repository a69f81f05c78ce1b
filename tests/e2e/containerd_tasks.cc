// See containerd_tasks.h. containerd's UpdateTaskRequest (tasks/v1:
// container_id=1, resources=2, annotations=3) has the same fields and
// numbers as the shim API's (task/v2: id=1, resources=2, annotations=3), so
// the shim's generated message serves as the request without importing
// containerd's services protos for one test call.
#include "tests/e2e/containerd_tasks.h"

#include <google/protobuf/empty.pb.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/impl/rpc_method.h>

#include <chrono>

#include "containerd/task/v2/shim.pb.h"
#include "runtime/common/grpc_status.h"

namespace capsule::testing {
namespace {

// From containerd's api/services/tasks/v1/tasks.proto.
constexpr const char* kUpdateMethod = "/containerd.services.tasks.v1.Tasks/Update";
// How containerd's Go client names LinuxResources in an Any (typeurl's
// registration of runtime-spec types, marshalled as JSON).
constexpr const char* kLinuxResourcesTypeUrl = "types.containerd.io/opencontainers/runtime-spec/1/LinuxResources";
constexpr std::chrono::seconds kUpdateTimeout{60};

}  // namespace

Status UpdateTaskResources(const std::string& grpc_socket, const std::string& ns, const std::string& container_id,
                           const std::string& resources_json) {
  auto channel = grpc::CreateChannel("unix://" + grpc_socket, grpc::InsecureChannelCredentials());
  containerd::task::v2::UpdateTaskRequest req;
  req.set_id(container_id);
  req.mutable_resources()->set_type_url(kLinuxResourcesTypeUrl);
  req.mutable_resources()->set_value(resources_json);
  google::protobuf::Empty resp;
  grpc::ClientContext ctx;
  ctx.AddMetadata("containerd-namespace", ns);
  ctx.set_deadline(std::chrono::system_clock::now() + kUpdateTimeout);
  const grpc::internal::RpcMethod method(kUpdateMethod, grpc::internal::RpcMethod::NORMAL_RPC, channel);
  grpc::Status st = grpc::internal::BlockingUnaryCall(channel.get(), method, &ctx, req, &resp);
  if (!st.ok())
    return FromGrpcStatus(st, "containerd Tasks.Update of " + container_id + ": " + st.error_message());
  return Status::Ok();
}

}  // namespace capsule::testing
