// GrpcAgentClient: every RPC goes through Call(), which gives the call its
// deadline, registers its ClientContext so Close() can cancel it, and maps
// the gRPC status to a capsule::Status naming the RPC. The channel is made
// from the connected stream (grpc::CreateCustomInsecureChannelFromFd); it
// cannot reconnect, so a dropped stream makes later calls UNAVAILABLE.
#include "runtime/agentclient/grpc_agent_client.h"

#include <fmt/format.h>
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <mutex>
#include <set>

#include "capsule/agent/v1/agent.grpc.pb.h"
#include "runtime/common/grpc_status.h"
#include "runtime/common/printable.h"

namespace capsule::agentclient {
namespace {

using std::chrono::milliseconds;
using Empty = google::protobuf::Empty;
using Stub = v1::Agent::Stub;

// Guest files read for diagnostics are capped at 1 MiB by the agent; leave
// room above gRPC's 4 MiB default for future bulk replies (stats, lists).
constexpr int kMaxReceiveBytes = 16 * 1024 * 1024;
// Of an agent's error message; ours are one line of well under this.
constexpr size_t kMaxAgentMessageBytes = 1024;

template <typename Req, typename Resp>
using Method = grpc::Status (Stub::*)(grpc::ClientContext*, const Req&, Resp*);

// A call that ran out its own deadline says so in the words users grep for
// ("agent CreateContainer: deadline exceeded after 30000 ms"); a
// DEADLINE_EXCEEDED the agent itself returned keeps the agent's message.
Status FromGrpc(std::string_view rpc, const grpc::Status& s, std::optional<milliseconds> timeout, bool deadline_passed) {
  const Code code = CodeFromNumber(static_cast<int64_t>(s.error_code()));
  if (code == Code::kDeadlineExceeded && timeout && deadline_passed)
    return DeadlineExceeded(fmt::format("agent {}: deadline exceeded after {} ms", rpc, timeout->count()));
  // The guest's words: they reach logs and the operator's terminal (exec),
  // so escape sequences and unbounded text stop here.
  std::string msg = s.error_message().empty() ? std::string(CodeName(code))
                                              : Printable(s.error_message(), kMaxAgentMessageBytes);
  return FromGrpcStatus(s, fmt::format("agent {}: {}", rpc, msg));
}

Status Done(Result<Empty> r) { return std::move(r).status(); }

class GrpcAgentClient final : public AgentClient {
 public:
  GrpcAgentClient(UniqueFd stream, ClientOptions options) : options_(std::move(options)) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    // As the agent's server (agent/server/grpc_server.cc): no BDP pings on a
    // local link, and a fixed window that lets the largest answer (a 1 MiB
    // ReadStdout chunk, a guest file) come in one go.
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kMaxReceiveBytes);
    // The channel owns the fd from here on, even if it turns out unusable.
    auto channel = grpc::CreateCustomInsecureChannelFromFd("capsule-agent", stream.release(), args);
    stub_ = std::make_shared<Stub>(channel);
  }
  ~GrpcAgentClient() override { Close(); }

  Result<v1::CheckResponse> Check(milliseconds timeout) override {
    return Call("Check", &Stub::Check, v1::CheckRequest(), timeout);
  }
  Result<v1::VersionResponse> Version() override {
    return Call("Version", &Stub::Version, v1::VersionRequest(), options_.default_call_timeout);
  }
  Result<v1::RehearseResponse> Rehearse(const v1::RehearseRequest& req, std::chrono::milliseconds timeout) override {
    return Call("Rehearse", &Stub::Rehearse, req, timeout);
  }
  Status SetGuestTime(const v1::SetGuestTimeRequest& req) override {
    return Done(Call("SetGuestTime", &Stub::SetGuestTime, req, options_.default_call_timeout));
  }
  Result<v1::AddRandomnessResponse> AddRandomness(const v1::AddRandomnessRequest& req) override {
    return Call("AddRandomness", &Stub::AddRandomness, req, options_.default_call_timeout);
  }
  Status CreateSandbox(const v1::CreateSandboxRequest& req) override {
    return Done(Call("CreateSandbox", &Stub::CreateSandbox, req, options_.default_call_timeout));
  }
  Result<v1::SetupSandboxResponse> SetupSandbox(const v1::SetupSandboxRequest& req) override {
    return Call("SetupSandbox", &Stub::SetupSandbox, req, options_.default_call_timeout);
  }
  Status DestroySandbox(const v1::DestroySandboxRequest& req) override;

  Result<v1::CreateContainerResponse> CreateContainer(const v1::CreateContainerRequest& req) override {
    return Call("CreateContainer", &Stub::CreateContainer, req, options_.default_call_timeout);
  }
  Result<v1::StartContainerResponse> StartContainer(const v1::StartContainerRequest& req) override {
    return Call("StartContainer", &Stub::StartContainer, req, options_.default_call_timeout);
  }
  Status RemoveContainer(const v1::RemoveContainerRequest& req) override {
    return Done(Call("RemoveContainer", &Stub::RemoveContainer, req, options_.default_call_timeout));
  }
  Result<v1::ExecProcessResponse> ExecProcess(const v1::ExecProcessRequest& req) override {
    return Call("ExecProcess", &Stub::ExecProcess, req, options_.default_call_timeout);
  }
  Result<v1::ExecProcessResponse> ExecGuestProcess(const v1::ExecGuestProcessRequest& req) override {
    return Call("ExecGuestProcess", &Stub::ExecGuestProcess, req, options_.default_call_timeout);
  }
  Status SignalProcess(const v1::SignalProcessRequest& req) override {
    return Done(Call("SignalProcess", &Stub::SignalProcess, req,
                     options_.signal_call_timeout.value_or(options_.default_call_timeout)));
  }
  Status RemoveProcess(const v1::RemoveProcessRequest& req) override {
    return Done(Call("RemoveProcess", &Stub::RemoveProcess, req, options_.default_call_timeout));
  }
  Result<v1::ListProcessesResponse> ListProcesses(const v1::ListProcessesRequest& req) override {
    return Call("ListProcesses", &Stub::ListProcesses, req, options_.default_call_timeout);
  }
  Status UpdateContainer(const v1::UpdateContainerRequest& req) override {
    return Done(Call("UpdateContainer", &Stub::UpdateContainer, req, options_.default_call_timeout));
  }
  Result<v1::StatsContainerResponse> StatsContainer(const v1::StatsContainerRequest& req) override {
    return Call("StatsContainer", &Stub::StatsContainer, req, options_.default_call_timeout);
  }
  Status PauseContainer(const v1::PauseContainerRequest& req) override {
    return Done(Call("PauseContainer", &Stub::PauseContainer, req, options_.default_call_timeout));
  }
  Status ResumeContainer(const v1::ResumeContainerRequest& req) override {
    return Done(Call("ResumeContainer", &Stub::ResumeContainer, req, options_.default_call_timeout));
  }

  Result<v1::WaitProcessResponse> WaitProcess(const v1::WaitProcessRequest& req,
                                              std::optional<milliseconds> timeout) override {
    return Call("WaitProcess", &Stub::WaitProcess, req, timeout);
  }
  Result<v1::ReadStreamResponse> ReadStdout(const v1::ReadStreamRequest& req) override {
    return Call("ReadStdout", &Stub::ReadStdout, req, std::nullopt);
  }
  Result<v1::ReadStreamResponse> ReadStderr(const v1::ReadStreamRequest& req) override {
    return Call("ReadStderr", &Stub::ReadStderr, req, std::nullopt);
  }
  Result<v1::OOMEvent> GetOOMEvent(milliseconds timeout) override {
    return Call("GetOOMEvent", &Stub::GetOOMEvent, v1::GetOOMEventRequest(), timeout);
  }

  Result<v1::WriteStreamResponse> WriteStdin(const v1::WriteStreamRequest& req) override {
    return Call("WriteStdin", &Stub::WriteStdin, req, options_.default_call_timeout);
  }
  Status CloseStdin(const v1::CloseStdinRequest& req) override {
    return Done(Call("CloseStdin", &Stub::CloseStdin, req, options_.default_call_timeout));
  }
  Status TtyWinResize(const v1::TtyWinResizeRequest& req) override {
    return Done(Call("TtyWinResize", &Stub::TtyWinResize, req,
                     options_.signal_call_timeout.value_or(options_.default_call_timeout)));
  }

  Result<v1::Interface> UpdateInterface(const v1::UpdateInterfaceRequest& req) override {
    return Call("UpdateInterface", &Stub::UpdateInterface, req, options_.default_call_timeout);
  }
  Result<v1::Routes> UpdateRoutes(const v1::UpdateRoutesRequest& req) override {
    return Call("UpdateRoutes", &Stub::UpdateRoutes, req, options_.default_call_timeout);
  }
  Result<v1::Interfaces> ListInterfaces() override {
    return Call("ListInterfaces", &Stub::ListInterfaces, v1::ListInterfacesRequest(), options_.default_call_timeout);
  }
  Result<v1::Routes> ListRoutes() override {
    return Call("ListRoutes", &Stub::ListRoutes, v1::ListRoutesRequest(), options_.default_call_timeout);
  }

  Result<v1::ReadGuestFileResponse> ReadGuestFile(const v1::ReadGuestFileRequest& req) override {
    return Call("ReadGuestFile", &Stub::ReadGuestFile, req, options_.default_call_timeout);
  }

  void Close() override;

 private:
  template <typename Req, typename Resp>
  Result<Resp> Call(std::string_view rpc, Method<Req, Resp> method, const Req& req,
                    std::optional<milliseconds> timeout);

  const ClientOptions options_;
  std::mutex mu_;
  std::condition_variable idle_;              // in_flight_ became empty
  std::shared_ptr<Stub> stub_;                // guarded by mu_; null once closed
  std::set<grpc::ClientContext*> in_flight_;  // guarded by mu_
};

template <typename Req, typename Resp>
Result<Resp> GrpcAgentClient::Call(std::string_view rpc, Method<Req, Resp> method, const Req& req,
                                   std::optional<milliseconds> timeout) {
  grpc::ClientContext ctx;
  const auto deadline = std::chrono::steady_clock::now() + timeout.value_or(milliseconds(0));
  if (timeout) ctx.set_deadline(std::chrono::system_clock::now() + *timeout);
  std::shared_ptr<Stub> stub;
  {
    std::lock_guard lock(mu_);
    if (!stub_) return Unavailable(fmt::format("agent {}: the client is closed", rpc));
    stub = stub_;
    in_flight_.insert(&ctx);
  }
  if (options_.on_call_start) options_.on_call_start(rpc);
  Resp resp;
  const auto started = std::chrono::steady_clock::now();
  // A TryCancel() that lands before the call starts still cancels it: gRPC
  // remembers it in the context.
  grpc::Status st = ((*stub).*method)(&ctx, req, &resp);
  if (options_.on_call_end)
    options_.on_call_end(rpc, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), st.ok());
  {
    std::lock_guard lock(mu_);
    in_flight_.erase(&ctx);
    if (in_flight_.empty()) idle_.notify_all();
  }
  if (!st.ok()) return FromGrpc(rpc, st, timeout, timeout && std::chrono::steady_clock::now() >= deadline);
  return resp;
}

Status GrpcAgentClient::DestroySandbox(const v1::DestroySandboxRequest& req) {
  Status st = Done(Call("DestroySandbox", &Stub::DestroySandbox, req, options_.default_call_timeout));
  // Powering off, the guest may close the stream before the reply got out.
  if (req.power_off() && st.code() == Code::kUnavailable) return Status::Ok();
  return st;
}

void GrpcAgentClient::Close() {
  std::shared_ptr<Stub> stub;
  {
    std::unique_lock lock(mu_);
    stub = std::move(stub_);  // no new call starts from here on
    for (grpc::ClientContext* ctx : in_flight_) ctx->TryCancel();
    // Cancelled calls return promptly; their contexts live on their callers'
    // stacks, so they must be gone before the channel is.
    idle_.wait(lock, [this] { return in_flight_.empty(); });
  }
  // The last reference to the channel goes here, closing the stream.
}

}  // namespace

AgentClientPtr NewGrpcAgentClient(UniqueFd stream, ClientOptions options) {
  return std::make_unique<GrpcAgentClient>(std::move(stream), std::move(options));
}

}  // namespace capsule::agentclient
