// Container and process RPCs: forwarded to the container engine when one is
// plugged in (SetContainerOps), UNIMPLEMENTED otherwise. Each is one line on
// purpose: the engine owns the logic and the request checks. The blocking
// ones first take a slot of the blocking-call gate (limits.h);
// StartContainer runs on gRPC's callback API, so that its init's exec
// follows the answer (AfterAnswerReactor).
#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"

namespace capsule::agent::server {
namespace {

Status NoEngine(std::string_view rpc) {
  return Unimplemented(std::string(rpc) + ": this agent has no container engine yet");
}

// Calls `fn(ops)` returning Status.
template <typename Fn>
grpc::Status Call(std::string_view rpc, ContainerOps* ops, Fn&& fn) {
  return Guarded(rpc, [&]() -> Status { return ops == nullptr ? NoEngine(rpc) : fn(*ops); });
}

// Calls `fn(ops)` returning Result<Resp> and moves the value into `out`.
template <typename Resp, typename Fn>
grpc::Status CallInto(std::string_view rpc, ContainerOps* ops, Resp* out, Fn&& fn) {
  return Guarded(rpc, [&]() -> Status {
    if (ops == nullptr) return NoEngine(rpc);
    Result<Resp> r = fn(*ops);
    if (!r.ok()) return std::move(r).status();
    *out = std::move(r).value();
    return Status::Ok();
  });
}

// CallInto for a blocking call: admitted through `gate` first.
template <typename Resp, typename Fn>
grpc::Status CallBlocking(std::string_view rpc, BlockingGate& gate, ContainerOps* ops, Resp* out, Fn&& fn) {
  auto slot = gate.Enter(rpc);
  if (!slot.ok()) return Reply(rpc, slot.status());
  return CallInto(rpc, ops, out, std::forward<Fn>(fn));
}

}  // namespace

grpc::Status AgentService::CreateContainer(Ctx*, const v1::CreateContainerRequest* req,
                                           v1::CreateContainerResponse* resp) {
  return CallInto("CreateContainer", containers_.load(), resp,
                  [&](ContainerOps& o) { return o.CreateContainer(*req); });
}

// The callback API's reactor lets the init's go follow the answer.
grpc::ServerUnaryReactor* AgentService::StartContainer(grpc::CallbackServerContext*,
                                                       const v1::StartContainerRequest* req,
                                                       v1::StartContainerResponse* resp) {
  auto* reactor = new AfterAnswerReactor();
  reactor->Finish(CallInto("StartContainer", containers_.load(), resp,
                           [&](ContainerOps& o) { return o.StartContainer(*req, reactor->after()); }));
  return reactor;
}

grpc::Status AgentService::RemoveContainer(Ctx*, const v1::RemoveContainerRequest* req, Empty*) {
  return Call("RemoveContainer", containers_.load(), [&](ContainerOps& o) { return o.RemoveContainer(*req); });
}

grpc::Status AgentService::ExecProcess(Ctx*, const v1::ExecProcessRequest* req, v1::ExecProcessResponse* resp) {
  return CallInto("ExecProcess", containers_.load(), resp, [&](ContainerOps& o) { return o.ExecProcess(*req); });
}

grpc::Status AgentService::ExecGuestProcess(Ctx*, const v1::ExecGuestProcessRequest* req,
                                            v1::ExecProcessResponse* resp) {
  return CallInto("ExecGuestProcess", containers_.load(), resp,
                  [&](ContainerOps& o) { return o.ExecGuestProcess(*req); });
}

grpc::Status AgentService::SignalProcess(Ctx*, const v1::SignalProcessRequest* req, Empty*) {
  return Call("SignalProcess", containers_.load(), [&](ContainerOps& o) { return o.SignalProcess(*req); });
}

grpc::Status AgentService::RemoveProcess(Ctx*, const v1::RemoveProcessRequest* req, Empty*) {
  return Call("RemoveProcess", containers_.load(), [&](ContainerOps& o) { return o.RemoveProcess(*req); });
}

grpc::Status AgentService::WaitProcess(Ctx* ctx, const v1::WaitProcessRequest* req, v1::WaitProcessResponse* resp) {
  GrpcCallContext call(ctx);
  return CallBlocking("WaitProcess", blocking_, containers_.load(), resp,
                      [&](ContainerOps& o) { return o.WaitProcess(*req, call); });
}

grpc::Status AgentService::ListProcesses(Ctx*, const v1::ListProcessesRequest* req,
                                         v1::ListProcessesResponse* resp) {
  return CallInto("ListProcesses", containers_.load(), resp, [&](ContainerOps& o) { return o.ListProcesses(*req); });
}

grpc::Status AgentService::UpdateContainer(Ctx*, const v1::UpdateContainerRequest* req, Empty*) {
  return Call("UpdateContainer", containers_.load(), [&](ContainerOps& o) { return o.UpdateContainer(*req); });
}

grpc::Status AgentService::StatsContainer(Ctx*, const v1::StatsContainerRequest* req,
                                          v1::StatsContainerResponse* resp) {
  return CallInto("StatsContainer", containers_.load(), resp, [&](ContainerOps& o) { return o.StatsContainer(*req); });
}

grpc::Status AgentService::PauseContainer(Ctx*, const v1::PauseContainerRequest* req, Empty*) {
  return Call("PauseContainer", containers_.load(), [&](ContainerOps& o) { return o.PauseContainer(*req); });
}

grpc::Status AgentService::ResumeContainer(Ctx*, const v1::ResumeContainerRequest* req, Empty*) {
  return Call("ResumeContainer", containers_.load(), [&](ContainerOps& o) { return o.ResumeContainer(*req); });
}

grpc::Status AgentService::WriteStdin(Ctx* ctx, const v1::WriteStreamRequest* req, v1::WriteStreamResponse* resp) {
  GrpcCallContext call(ctx);
  return CallBlocking("WriteStdin", blocking_, containers_.load(), resp,
                      [&](ContainerOps& o) { return o.WriteStdin(*req, call); });
}

grpc::Status AgentService::ReadStdout(Ctx* ctx, const v1::ReadStreamRequest* req, v1::ReadStreamResponse* resp) {
  GrpcCallContext call(ctx);
  return CallBlocking("ReadStdout", blocking_, containers_.load(), resp,
                      [&](ContainerOps& o) { return o.ReadStdout(*req, call); });
}

grpc::Status AgentService::ReadStderr(Ctx* ctx, const v1::ReadStreamRequest* req, v1::ReadStreamResponse* resp) {
  GrpcCallContext call(ctx);
  return CallBlocking("ReadStderr", blocking_, containers_.load(), resp,
                      [&](ContainerOps& o) { return o.ReadStderr(*req, call); });
}

grpc::Status AgentService::CloseStdin(Ctx*, const v1::CloseStdinRequest* req, Empty*) {
  return Call("CloseStdin", containers_.load(), [&](ContainerOps& o) { return o.CloseStdin(*req); });
}

grpc::Status AgentService::TtyWinResize(Ctx*, const v1::TtyWinResizeRequest* req, Empty*) {
  return Call("TtyWinResize", containers_.load(), [&](ContainerOps& o) { return o.TtyWinResize(*req); });
}

grpc::Status AgentService::GetOOMEvent(Ctx* ctx, const v1::GetOOMEventRequest* req, v1::OOMEvent* resp) {
  GrpcCallContext call(ctx);
  return CallBlocking("GetOOMEvent", blocking_, containers_.load(), resp,
                      [&](ContainerOps& o) { return o.GetOOMEvent(*req, call); });
}

}  // namespace capsule::agent::server
