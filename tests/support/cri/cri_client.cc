// CRI calls over the generated gRPC stubs: one helper sets the deadline and
// turns a gRPC failure into a Status naming the call and the object.
#include "tests/support/cri/cri_client.h"

#include <grpcpp/grpcpp.h>

#include <fmt/format.h>

#include "cri/runtime/v1/api.grpc.pb.h"
#include "runtime/common/grpc_status.h"

namespace capsule::testing::cri {

struct CriClient::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::RuntimeService::Stub> runtime;
  std::unique_ptr<v1::ImageService::Stub> image;
};

namespace {

// Runs one unary call with a deadline; `call(ctx, resp)` invokes the stub.
template <typename Resp, typename CallFn>
Result<Resp> Invoke(const char* method, const std::string& object, std::chrono::milliseconds timeout,
                    CallFn call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  Resp resp;
  grpc::Status st = call(&ctx, &resp);
  if (!st.ok()) {
    return FromGrpcStatus(st,
                  fmt::format("CRI {}{}: {}", method, object.empty() ? "" : " " + object, st.error_message()));
  }
  return resp;
}

void CopyMap(const std::map<std::string, std::string>& from, google::protobuf::Map<std::string, std::string>* to) {
  for (const auto& [k, v] : from) (*to)[k] = v;
}

}  // namespace

v1::PodSandboxConfig MakePodConfig(const PodOptions& o) {
  v1::PodSandboxConfig c;
  auto* md = c.mutable_metadata();
  md->set_name(o.name);
  md->set_uid(o.uid.empty() ? "uid-" + o.name : o.uid);
  md->set_namespace_(o.k8s_namespace);
  md->set_attempt(o.attempt);
  c.set_hostname(o.hostname);
  c.set_log_directory(o.log_directory);
  CopyMap(o.labels, c.mutable_labels());
  CopyMap(o.annotations, c.mutable_annotations());
  auto* linux = c.mutable_linux();
  linux->set_cgroup_parent(o.cgroup_parent);
  auto* ns = linux->mutable_security_context()->mutable_namespace_options();
  ns->set_network(o.network);
  ns->set_pid(o.pid);
  ns->set_ipc(o.ipc);
  linux->mutable_security_context()->set_privileged(o.privileged);
  return c;
}

v1::ContainerConfig MakeContainerConfig(const ContainerOptions& o) {
  v1::ContainerConfig c;
  c.mutable_metadata()->set_name(o.name);
  c.mutable_image()->set_image(o.image);
  for (const auto& s : o.command) c.add_command(s);
  for (const auto& s : o.args) c.add_args(s);
  for (const auto& [k, v] : o.env) {
    auto* kv = c.add_envs();
    kv->set_key(k);
    kv->set_value(v);
  }
  c.set_working_dir(o.working_dir);
  c.set_log_path(o.log_path);
  c.set_tty(o.tty);
  c.set_stdin(o.stdin);
  CopyMap(o.labels, c.mutable_labels());
  CopyMap(o.annotations, c.mutable_annotations());
  return c;
}

CriClient::CriClient(std::unique_ptr<Stubs> stubs) : stubs_(std::move(stubs)) {}
CriClient::~CriClient() = default;

Result<std::unique_ptr<CriClient>> CriClient::Connect(const std::string& socket_path,
                                                      std::chrono::milliseconds timeout) {
  auto stubs = std::make_unique<Stubs>();
  stubs->channel = grpc::CreateChannel("unix://" + socket_path, grpc::InsecureChannelCredentials());
  if (!stubs->channel->WaitForConnected(std::chrono::system_clock::now() + timeout))
    return Unavailable(fmt::format("CRI: cannot connect to {} within {} ms", socket_path, timeout.count()));
  stubs->runtime = v1::RuntimeService::NewStub(stubs->channel);
  stubs->image = v1::ImageService::NewStub(stubs->channel);
  return std::unique_ptr<CriClient>(new CriClient(std::move(stubs)));
}

Result<v1::VersionResponse> CriClient::Version() {
  v1::VersionRequest req;
  req.set_version("v1");
  return Invoke<v1::VersionResponse>("Version", "", call_timeout_, [&](auto* ctx, auto* resp) {
    return stubs_->runtime->Version(ctx, req, resp);
  });
}

Result<std::string> CriClient::RunPod(const v1::PodSandboxConfig& config, const std::string& handler) {
  v1::RunPodSandboxRequest req;
  *req.mutable_config() = config;
  req.set_runtime_handler(handler);
  auto resp = Invoke<v1::RunPodSandboxResponse>(
      "RunPodSandbox", config.metadata().name(), call_timeout_,
      [&](auto* ctx, auto* r) { return stubs_->runtime->RunPodSandbox(ctx, req, r); });
  if (!resp.ok()) return std::move(resp).status();
  return resp->pod_sandbox_id();
}

Result<std::string> CriClient::RunPod(const PodOptions& options) {
  return RunPod(MakePodConfig(options), options.runtime_handler);
}

Status CriClient::StopPod(const std::string& pod_id) {
  v1::StopPodSandboxRequest req;
  req.set_pod_sandbox_id(pod_id);
  return Invoke<v1::StopPodSandboxResponse>("StopPodSandbox", pod_id, call_timeout_, [&](auto* ctx, auto* r) {
           return stubs_->runtime->StopPodSandbox(ctx, req, r);
         }).status();
}

Status CriClient::RemovePod(const std::string& pod_id) {
  v1::RemovePodSandboxRequest req;
  req.set_pod_sandbox_id(pod_id);
  return Invoke<v1::RemovePodSandboxResponse>("RemovePodSandbox", pod_id, call_timeout_, [&](auto* ctx, auto* r) {
           return stubs_->runtime->RemovePodSandbox(ctx, req, r);
         }).status();
}

Result<v1::PodSandboxStatusResponse> CriClient::PodStatus(const std::string& pod_id, bool verbose) {
  v1::PodSandboxStatusRequest req;
  req.set_pod_sandbox_id(pod_id);
  req.set_verbose(verbose);
  return Invoke<v1::PodSandboxStatusResponse>("PodSandboxStatus", pod_id, call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->runtime->PodSandboxStatus(ctx, req, r);
  });
}

Result<std::vector<v1::PodSandbox>> CriClient::ListPods() {
  v1::ListPodSandboxRequest req;
  auto resp = Invoke<v1::ListPodSandboxResponse>("ListPodSandbox", "", call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->runtime->ListPodSandbox(ctx, req, r);
  });
  if (!resp.ok()) return std::move(resp).status();
  return std::vector<v1::PodSandbox>(resp->items().begin(), resp->items().end());
}

Result<std::string> CriClient::CreateContainer(const std::string& pod_id, const v1::PodSandboxConfig& pod,
                                               const v1::ContainerConfig& config) {
  v1::CreateContainerRequest req;
  req.set_pod_sandbox_id(pod_id);
  *req.mutable_config() = config;
  *req.mutable_sandbox_config() = pod;
  auto resp = Invoke<v1::CreateContainerResponse>(
      "CreateContainer", config.metadata().name() + " in " + pod_id, call_timeout_,
      [&](auto* ctx, auto* r) { return stubs_->runtime->CreateContainer(ctx, req, r); });
  if (!resp.ok()) return std::move(resp).status();
  return resp->container_id();
}

Result<std::string> CriClient::CreateContainer(const std::string& pod_id, const v1::PodSandboxConfig& pod,
                                               const ContainerOptions& options) {
  v1::ContainerConfig config = MakeContainerConfig(options);
  // Like the kubelet: a container shares the pod's namespace choices.
  auto* ns = config.mutable_linux()->mutable_security_context()->mutable_namespace_options();
  *ns = pod.linux().security_context().namespace_options();
  if (options.pid) ns->set_pid(*options.pid);
  if (options.privileged) config.mutable_linux()->mutable_security_context()->set_privileged(true);
  return CreateContainer(pod_id, pod, config);
}

Status CriClient::StartContainer(const std::string& id) {
  v1::StartContainerRequest req;
  req.set_container_id(id);
  return Invoke<v1::StartContainerResponse>("StartContainer", id, call_timeout_, [&](auto* ctx, auto* r) {
           return stubs_->runtime->StartContainer(ctx, req, r);
         }).status();
}

Status CriClient::StopContainer(const std::string& id, int64_t timeout_seconds,
                                std::optional<std::chrono::milliseconds> deadline) {
  v1::StopContainerRequest req;
  req.set_container_id(id);
  req.set_timeout(timeout_seconds);
  return Invoke<v1::StopContainerResponse>("StopContainer", id,
                                           deadline.value_or(call_timeout_ + std::chrono::seconds(timeout_seconds)),
                                           [&](auto* ctx, auto* r) { return stubs_->runtime->StopContainer(ctx, req, r); })
      .status();
}

Status CriClient::UpdateContainerResources(const std::string& id, const v1::LinuxContainerResources& resources) {
  v1::UpdateContainerResourcesRequest req;
  req.set_container_id(id);
  *req.mutable_linux() = resources;
  return Invoke<v1::UpdateContainerResourcesResponse>(
             "UpdateContainerResources", id, call_timeout_,
             [&](auto* ctx, auto* r) { return stubs_->runtime->UpdateContainerResources(ctx, req, r); })
      .status();
}

Status CriClient::ReopenContainerLog(const std::string& id) {
  v1::ReopenContainerLogRequest req;
  req.set_container_id(id);
  return Invoke<v1::ReopenContainerLogResponse>(
             "ReopenContainerLog", id, call_timeout_,
             [&](auto* ctx, auto* r) { return stubs_->runtime->ReopenContainerLog(ctx, req, r); })
      .status();
}

Status CriClient::RemoveContainer(const std::string& id) {
  v1::RemoveContainerRequest req;
  req.set_container_id(id);
  return Invoke<v1::RemoveContainerResponse>("RemoveContainer", id, call_timeout_, [&](auto* ctx, auto* r) {
           return stubs_->runtime->RemoveContainer(ctx, req, r);
         }).status();
}

Result<v1::ContainerStatusResponse> CriClient::ContainerStatus(const std::string& id, bool verbose) {
  v1::ContainerStatusRequest req;
  req.set_container_id(id);
  req.set_verbose(verbose);
  return Invoke<v1::ContainerStatusResponse>("ContainerStatus", id, call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->runtime->ContainerStatus(ctx, req, r);
  });
}

Result<std::vector<v1::Container>> CriClient::ListContainers(const std::string& pod_id) {
  v1::ListContainersRequest req;
  if (!pod_id.empty()) req.mutable_filter()->set_pod_sandbox_id(pod_id);
  auto resp = Invoke<v1::ListContainersResponse>("ListContainers", pod_id, call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->runtime->ListContainers(ctx, req, r);
  });
  if (!resp.ok()) return std::move(resp).status();
  return std::vector<v1::Container>(resp->containers().begin(), resp->containers().end());
}

Result<ExecResult> CriClient::ExecSync(const std::string& id, const std::vector<std::string>& cmd,
                                       int64_t timeout_seconds) {
  v1::ExecSyncRequest req;
  req.set_container_id(id);
  for (const auto& c : cmd) req.add_cmd(c);
  req.set_timeout(timeout_seconds);
  auto resp = Invoke<v1::ExecSyncResponse>(
      "ExecSync", id + " (" + (cmd.empty() ? "" : cmd[0]) + ")", call_timeout_ + std::chrono::seconds(timeout_seconds),
      [&](auto* ctx, auto* r) { return stubs_->runtime->ExecSync(ctx, req, r); });
  if (!resp.ok()) return std::move(resp).status();
  return ExecResult{resp->exit_code(), resp->stdout(), resp->stderr()};
}

Result<std::string> CriClient::Exec(const std::string& id, const std::vector<std::string>& cmd,
                                    const StreamingOptions& streams) {
  v1::ExecRequest req;
  req.set_container_id(id);
  for (const auto& c : cmd) req.add_cmd(c);
  req.set_tty(streams.tty);
  req.set_stdin(streams.stdin);
  req.set_stdout(streams.stdout);
  req.set_stderr(streams.stderr);
  auto resp = Invoke<v1::ExecResponse>("Exec", id + " (" + (cmd.empty() ? "" : cmd[0]) + ")", call_timeout_,
                                       [&](auto* ctx, auto* r) { return stubs_->runtime->Exec(ctx, req, r); });
  if (!resp.ok()) return std::move(resp).status();
  return resp->url();
}

Result<std::string> CriClient::Attach(const std::string& id, const StreamingOptions& streams) {
  v1::AttachRequest req;
  req.set_container_id(id);
  req.set_tty(streams.tty);
  req.set_stdin(streams.stdin);
  req.set_stdout(streams.stdout);
  req.set_stderr(streams.stderr);
  auto resp = Invoke<v1::AttachResponse>("Attach", id, call_timeout_,
                                         [&](auto* ctx, auto* r) { return stubs_->runtime->Attach(ctx, req, r); });
  if (!resp.ok()) return std::move(resp).status();
  return resp->url();
}

Result<std::string> CriClient::PortForward(const std::string& pod_id, const std::vector<int32_t>& ports) {
  v1::PortForwardRequest req;
  req.set_pod_sandbox_id(pod_id);
  for (int32_t p : ports) req.add_port(p);
  auto resp = Invoke<v1::PortForwardResponse>("PortForward", pod_id, call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->runtime->PortForward(ctx, req, r);
  });
  if (!resp.ok()) return std::move(resp).status();
  return resp->url();
}

Result<v1::ContainerStats> CriClient::ContainerStats(const std::string& id) {
  v1::ContainerStatsRequest req;
  req.set_container_id(id);
  auto resp = Invoke<v1::ContainerStatsResponse>("ContainerStats", id, call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->runtime->ContainerStats(ctx, req, r);
  });
  if (!resp.ok()) return std::move(resp).status();
  return resp->stats();
}

Result<std::vector<v1::ContainerStats>> CriClient::ListContainerStats(const std::string& pod_id) {
  v1::ListContainerStatsRequest req;
  if (!pod_id.empty()) req.mutable_filter()->set_pod_sandbox_id(pod_id);
  auto resp = Invoke<v1::ListContainerStatsResponse>("ListContainerStats", pod_id, call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->runtime->ListContainerStats(ctx, req, r);
  });
  if (!resp.ok()) return std::move(resp).status();
  return std::vector<v1::ContainerStats>(resp->stats().begin(), resp->stats().end());
}

Result<std::vector<v1::Image>> CriClient::ListImages() {
  v1::ListImagesRequest req;
  auto resp = Invoke<v1::ListImagesResponse>("ListImages", "", call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->image->ListImages(ctx, req, r);
  });
  if (!resp.ok()) return std::move(resp).status();
  return std::vector<v1::Image>(resp->images().begin(), resp->images().end());
}

Result<v1::Image> CriClient::ImageStatus(const std::string& ref) {
  v1::ImageStatusRequest req;
  req.mutable_image()->set_image(ref);
  auto resp = Invoke<v1::ImageStatusResponse>("ImageStatus", ref, call_timeout_, [&](auto* ctx, auto* r) {
    return stubs_->image->ImageStatus(ctx, req, r);
  });
  if (!resp.ok()) return std::move(resp).status();
  if (!resp->has_image()) return NotFound("CRI ImageStatus " + ref + ": image not found");
  return resp->image();
}

}  // namespace capsule::testing::cri
