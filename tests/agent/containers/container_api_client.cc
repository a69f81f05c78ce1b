// One gRPC call per helper; contexts carry a deadline so a hung agent fails
// the test instead of hanging it.
#include "tests/agent/containers/container_api_client.h"

#include <sys/random.h>
#include <time.h>

#include <algorithm>
#include <sstream>

#include "tests/agent/support/busybox_rootfs.h"
#include "runtime/common/grpc_status.h"

namespace capsule::agent::testing {
namespace {

std::unique_ptr<grpc::ClientContext> Ctx(std::chrono::milliseconds deadline = kCallDeadline) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + deadline);
  return ctx;
}

template <typename Req, typename Resp, typename Method>
Result<Resp> Invoke(v1::Agent::Stub& stub, Method method, const Req& req,
                    std::chrono::milliseconds deadline = kCallDeadline) {
  Resp resp;
  grpc::Status st = (stub.*method)(Ctx(deadline).get(), req, &resp);
  if (!st.ok()) return FromGrpc(st);
  return resp;
}

}  // namespace

Status FromGrpc(const grpc::Status& st) {
  return FromGrpcStatus(st, st.error_message());
}

Status ApiClient::CreateSandbox(const std::string& id, bool sandbox_pidns) {
  v1::CreateSandboxRequest req;
  req.set_sandbox_id(id);
  req.set_sandbox_pidns(sandbox_pidns);
  for (const auto& s : ep_.sandbox_storages()) *req.add_storages() = s;
  return Invoke<v1::CreateSandboxRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::CreateSandbox, req)
      .status();
}

Result<v1::SetupSandboxResponse> ApiClient::SetupSandboxWithHolder(const std::string& id,
                                                                  const std::string& hostname) {
  v1::SetupSandboxRequest req;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  req.mutable_time()->set_seconds(now.tv_sec);
  req.mutable_time()->set_nanos(static_cast<int32_t>(now.tv_nsec));
  std::string seed(64, '\0');
  if (::getrandom(seed.data(), seed.size(), 0) != static_cast<ssize_t>(seed.size())) return ErrnoStatus("getrandom");
  req.mutable_randomness()->set_data(seed);
  v1::CreateSandboxRequest& sb = *req.mutable_sandbox();
  sb.set_sandbox_id(id);
  sb.set_hostname(hostname);
  for (const auto& s : ep_.sandbox_storages()) *sb.add_storages() = s;
  req.set_holder_container_id(id);
  return Invoke<v1::SetupSandboxRequest, v1::SetupSandboxResponse>(stub_, &v1::Agent::Stub::SetupSandbox, req);
}

Status ApiClient::DestroySandbox() {
  return Invoke<v1::DestroySandboxRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::DestroySandbox,
                                                                    v1::DestroySandboxRequest(), kBlockingDeadline)
      .status();
}

Status ApiClient::Create(const std::string& id, const nlohmann::json& spec, bool sandbox_pidns,
                         const std::vector<v1::Storage>& storages, bool stdin_closed) {
  return CreateAnswered(id, spec, sandbox_pidns, storages, stdin_closed).status();
}

Result<v1::CreateContainerResponse> ApiClient::CreateAnswered(const std::string& id, const nlohmann::json& spec,
                                                              bool sandbox_pidns,
                                                              const std::vector<v1::Storage>& storages,
                                                              bool stdin_closed) {
  v1::CreateContainerRequest req;
  req.set_container_id(id);
  req.set_oci_spec_json(spec.dump());
  req.set_sandbox_pidns(sandbox_pidns);
  req.set_stdin_closed(stdin_closed);
  for (const auto& s : storages) *req.add_storages() = s;
  return Invoke<v1::CreateContainerRequest, v1::CreateContainerResponse>(stub_, &v1::Agent::Stub::CreateContainer, req,
                                                                         kBlockingDeadline);
}

Status ApiClient::CreateRaw(const std::string& id, const std::string& spec_json) {
  v1::CreateContainerRequest req;
  req.set_container_id(id);
  req.set_oci_spec_json(spec_json);
  return Invoke<v1::CreateContainerRequest, v1::CreateContainerResponse>(stub_, &v1::Agent::Stub::CreateContainer, req)
      .status();
}

Result<uint32_t> ApiClient::Start(const std::string& id) {
  v1::StartContainerRequest req;
  req.set_container_id(id);
  ASSIGN_OR_RETURN(auto resp, (Invoke<v1::StartContainerRequest, v1::StartContainerResponse>(
                                  stub_, &v1::Agent::Stub::StartContainer, req, kBlockingDeadline)));
  return resp.pid();
}

Status ApiClient::Remove(const std::string& id) {
  v1::RemoveContainerRequest req;
  req.set_container_id(id);
  return Invoke<v1::RemoveContainerRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::RemoveContainer, req,
                                                                     kBlockingDeadline)
      .status();
}

Result<uint32_t> ApiClient::Exec(const std::string& id, const std::string& exec_id, const nlohmann::json& process,
                                 bool stdin_closed) {
  v1::ExecProcessRequest req;
  req.set_container_id(id);
  req.set_exec_id(exec_id);
  req.set_process_json(process.dump());
  req.set_stdin_closed(stdin_closed);
  ASSIGN_OR_RETURN(auto resp, (Invoke<v1::ExecProcessRequest, v1::ExecProcessResponse>(
                                  stub_, &v1::Agent::Stub::ExecProcess, req, kBlockingDeadline)));
  return resp.pid();
}

Result<uint32_t> ApiClient::ExecGuest(const std::string& exec_id, const nlohmann::json& process,
                                      const std::string& tools_container, bool as_guest_root) {
  v1::ExecGuestProcessRequest req;
  req.set_exec_id(exec_id);
  req.set_process_json(process.dump());
  req.set_tools_container_id(tools_container);
  req.set_tools_as_guest_root(as_guest_root);
  ASSIGN_OR_RETURN(auto resp, (Invoke<v1::ExecGuestProcessRequest, v1::ExecProcessResponse>(
                                  stub_, &v1::Agent::Stub::ExecGuestProcess, req, kBlockingDeadline)));
  return resp.pid();
}

Status ApiClient::Signal(const std::string& id, const std::string& exec_id, uint32_t signal, bool all) {
  v1::SignalProcessRequest req;
  req.set_container_id(id);
  req.set_exec_id(exec_id);
  req.set_signal(signal);
  req.set_all(all);
  return Invoke<v1::SignalProcessRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::SignalProcess, req)
      .status();
}

Result<v1::WaitProcessResponse> ApiClient::Wait(const std::string& id, const std::string& exec_id,
                                                std::chrono::milliseconds deadline) {
  v1::WaitProcessRequest req;
  req.set_container_id(id);
  req.set_exec_id(exec_id);
  return Invoke<v1::WaitProcessRequest, v1::WaitProcessResponse>(stub_, &v1::Agent::Stub::WaitProcess, req,
                                                                 deadline);
}

Status ApiClient::RemoveProcess(const std::string& id, const std::string& exec_id) {
  v1::RemoveProcessRequest req;
  req.set_container_id(id);
  req.set_exec_id(exec_id);
  return Invoke<v1::RemoveProcessRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::RemoveProcess, req)
      .status();
}

Result<v1::ReadStreamResponse> ApiClient::Read(const std::string& id, const std::string& exec_id,
                                               bool stderr_stream, uint32_t len) {
  v1::ReadStreamRequest req;
  req.set_container_id(id);
  req.set_exec_id(exec_id);
  req.set_len(len);
  auto method = stderr_stream ? &v1::Agent::Stub::ReadStderr : &v1::Agent::Stub::ReadStdout;
  return Invoke<v1::ReadStreamRequest, v1::ReadStreamResponse>(stub_, method, req, kBlockingDeadline);
}

Result<std::string> ApiClient::ReadAll(const std::string& id, const std::string& exec_id, bool stderr_stream,
                                       const std::string& until) {
  std::string all;
  for (;;) {
    ASSIGN_OR_RETURN(v1::ReadStreamResponse r, Read(id, exec_id, stderr_stream));
    all += r.data();
    if (r.eof() || (!until.empty() && all.find(until) != std::string::npos)) return all;
  }
}

Result<uint32_t> ApiClient::Write(const std::string& id, const std::string& exec_id, const std::string& data) {
  v1::WriteStreamRequest req;
  req.set_container_id(id);
  req.set_exec_id(exec_id);
  req.set_data(data);
  ASSIGN_OR_RETURN(auto resp, (Invoke<v1::WriteStreamRequest, v1::WriteStreamResponse>(
                                  stub_, &v1::Agent::Stub::WriteStdin, req)));
  return resp.len();
}

Status ApiClient::CloseStdin(const std::string& id, const std::string& exec_id) {
  v1::CloseStdinRequest req;
  req.set_container_id(id);
  req.set_exec_id(exec_id);
  return Invoke<v1::CloseStdinRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::CloseStdin, req).status();
}

Status ApiClient::Resize(const std::string& id, const std::string& exec_id, uint32_t row, uint32_t column) {
  v1::TtyWinResizeRequest req;
  req.set_container_id(id);
  req.set_exec_id(exec_id);
  req.set_row(row);
  req.set_column(column);
  return Invoke<v1::TtyWinResizeRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::TtyWinResize, req)
      .status();
}

Result<v1::ListProcessesResponse> ApiClient::List(const std::string& id) {
  v1::ListProcessesRequest req;
  req.set_container_id(id);
  return Invoke<v1::ListProcessesRequest, v1::ListProcessesResponse>(stub_, &v1::Agent::Stub::ListProcesses, req);
}

Result<v1::StatsContainerResponse> ApiClient::Stats(const std::string& id) {
  v1::StatsContainerRequest req;
  req.set_container_id(id);
  return Invoke<v1::StatsContainerRequest, v1::StatsContainerResponse>(stub_, &v1::Agent::Stub::StatsContainer, req);
}

Status ApiClient::Update(const std::string& id, const nlohmann::json& resources) {
  v1::UpdateContainerRequest req;
  req.set_container_id(id);
  req.set_resources_json(resources.dump());
  return Invoke<v1::UpdateContainerRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::UpdateContainer, req)
      .status();
}

Status ApiClient::Pause(const std::string& id) {
  v1::PauseContainerRequest req;
  req.set_container_id(id);
  return Invoke<v1::PauseContainerRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::PauseContainer, req)
      .status();
}

Status ApiClient::Resume(const std::string& id) {
  v1::ResumeContainerRequest req;
  req.set_container_id(id);
  return Invoke<v1::ResumeContainerRequest, google::protobuf::Empty>(stub_, &v1::Agent::Stub::ResumeContainer, req)
      .status();
}

Result<std::string> ApiClient::ReadFile(const std::string& path) {
  v1::ReadGuestFileRequest req;
  req.set_path(path);
  req.set_max_bytes(1024 * 1024);
  ASSIGN_OR_RETURN(auto resp, (Invoke<v1::ReadGuestFileRequest, v1::ReadGuestFileResponse>(
                                  stub_, &v1::Agent::Stub::ReadGuestFile, req)));
  return resp.data();
}

nlohmann::json ApiClient::Spec(const std::vector<std::string>& args) const { return DefaultSpec(args, ep_.rootfs()); }

nlohmann::json ApiClient::Process(const std::vector<std::string>& args, bool terminal) {
  nlohmann::json p = DefaultSpec(args, "/")["process"];
  p["terminal"] = terminal;
  return p;
}

std::vector<std::string> MountPoints(const std::string& mountinfo) {
  std::vector<std::string> out;
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string f[5];
    for (auto& x : f) fields >> x;
    out.push_back(f[4]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace capsule::agent::testing
