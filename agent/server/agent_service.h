// capsule.agent.v1.Agent, the agent's gRPC service. Handlers are thin, one
// file per RPC (rpc_*.cc): check the request, call the pod slot (agent/pod),
// the guest-system helpers or the container RPCs (ContainerOps), map the
// Status. No handler
// lets an exception or a bad request take the agent down.
//
// DestroySandbox and StartContainer use gRPC's callback API so what must
// follow the reply (the power-off DestroySandbox may ask for, the started
// init's exec) starts only after it has been handed to the transport
// (AfterAnswerReactor's OnDone).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "agent/net/network.h"
#include "agent/pod/pod_slot.h"
#include "agent/server/blocking_gate.h"
#include "agent/server/container_ops.h"
#include "agent/server/limits.h"
#include "agent/server/lifecycle.h"
#include "capsule/agent/v1/agent.grpc.pb.h"

namespace capsule::agent::server {

inline constexpr const char* kServiceName = "capsule.agent.v1.Agent";
// ReadGuestFile's ceiling on max_bytes: well inside gRPC's 4 MiB messages.
inline constexpr uint32_t kMaxReadGuestFileBytes = 1024 * 1024;

struct AgentServiceOptions {
  // False when the agent runs on a host for tests (--no-init): SetGuestTime
  // then answers FAILED_PRECONDITION instead of setting the host's clock.
  bool may_set_clock = true;
  // Blocking calls admitted at once (limits.h).
  uint32_t max_blocking_calls = kDefaultMaxBlockingCalls;
};

using AgentServiceBase =
    v1::Agent::WithCallbackMethod_DestroySandbox<v1::Agent::WithCallbackMethod_StartContainer<v1::Agent::Service>>;

class AgentService final : public AgentServiceBase {
 public:
  // Neither pointer is owned; both must outlive the service.
  AgentService(AgentServiceOptions options, pod::PodSlot* pods, AgentLifecycle* lifecycle);

  // Plugs the container RPCs in (not owned). Call before the server starts;
  // without them they answer UNIMPLEMENTED.
  void SetContainerOps(ContainerOps* ops) { containers_.store(ops); }
  // Plugs the guest network in (not owned). Call before the server starts;
  // without one the network RPCs answer UNIMPLEMENTED.
  void SetNetwork(net::Network* network) { network_ = network; }

  using Ctx = grpc::ServerContext;
  using Empty = google::protobuf::Empty;

  grpc::Status Check(Ctx*, const v1::CheckRequest*, v1::CheckResponse*) override;
  grpc::Status Version(Ctx*, const v1::VersionRequest*, v1::VersionResponse*) override;
  grpc::Status SetGuestTime(Ctx*, const v1::SetGuestTimeRequest*, Empty*) override;
  grpc::Status AddRandomness(Ctx*, const v1::AddRandomnessRequest*, v1::AddRandomnessResponse*) override;
  grpc::Status CreateSandbox(Ctx*, const v1::CreateSandboxRequest*, Empty*) override;
  grpc::Status SetupSandbox(Ctx*, const v1::SetupSandboxRequest*, v1::SetupSandboxResponse*) override;
  grpc::ServerUnaryReactor* DestroySandbox(grpc::CallbackServerContext*, const v1::DestroySandboxRequest*,
                                           Empty*) override;
  grpc::Status ReadGuestFile(Ctx*, const v1::ReadGuestFileRequest*, v1::ReadGuestFileResponse*) override;

  // Container RPCs, forwarded to ContainerOps (rpc_containers.cc).
  grpc::Status Rehearse(Ctx*, const v1::RehearseRequest*, v1::RehearseResponse*) override;
  grpc::Status CreateContainer(Ctx*, const v1::CreateContainerRequest*, v1::CreateContainerResponse*) override;
  grpc::ServerUnaryReactor* StartContainer(grpc::CallbackServerContext*, const v1::StartContainerRequest*,
                                           v1::StartContainerResponse*) override;
  grpc::Status RemoveContainer(Ctx*, const v1::RemoveContainerRequest*, Empty*) override;
  grpc::Status ExecProcess(Ctx*, const v1::ExecProcessRequest*, v1::ExecProcessResponse*) override;
  grpc::Status ExecGuestProcess(Ctx*, const v1::ExecGuestProcessRequest*, v1::ExecProcessResponse*) override;
  grpc::Status SignalProcess(Ctx*, const v1::SignalProcessRequest*, Empty*) override;
  grpc::Status RemoveProcess(Ctx*, const v1::RemoveProcessRequest*, Empty*) override;
  grpc::Status WaitProcess(Ctx*, const v1::WaitProcessRequest*, v1::WaitProcessResponse*) override;
  grpc::Status ListProcesses(Ctx*, const v1::ListProcessesRequest*, v1::ListProcessesResponse*) override;
  grpc::Status UpdateContainer(Ctx*, const v1::UpdateContainerRequest*, Empty*) override;
  grpc::Status StatsContainer(Ctx*, const v1::StatsContainerRequest*, v1::StatsContainerResponse*) override;
  grpc::Status PauseContainer(Ctx*, const v1::PauseContainerRequest*, Empty*) override;
  grpc::Status ResumeContainer(Ctx*, const v1::ResumeContainerRequest*, Empty*) override;
  grpc::Status WriteStdin(Ctx*, const v1::WriteStreamRequest*, v1::WriteStreamResponse*) override;
  grpc::Status ReadStdout(Ctx*, const v1::ReadStreamRequest*, v1::ReadStreamResponse*) override;
  grpc::Status ReadStderr(Ctx*, const v1::ReadStreamRequest*, v1::ReadStreamResponse*) override;
  grpc::Status CloseStdin(Ctx*, const v1::CloseStdinRequest*, Empty*) override;
  grpc::Status TtyWinResize(Ctx*, const v1::TtyWinResizeRequest*, Empty*) override;
  grpc::Status GetOOMEvent(Ctx*, const v1::GetOOMEventRequest*, v1::OOMEvent*) override;

  // Guest network RPCs (rpc_network.cc).
  grpc::Status UpdateInterface(Ctx*, const v1::UpdateInterfaceRequest*, v1::Interface*) override;
  grpc::Status UpdateRoutes(Ctx*, const v1::UpdateRoutesRequest*, v1::Routes*) override;
  grpc::Status ListInterfaces(Ctx*, const v1::ListInterfacesRequest*, v1::Interfaces*) override;
  grpc::Status ListRoutes(Ctx*, const v1::ListRoutesRequest*, v1::Routes*) override;

 private:
  // The steps SetupSandbox shares with the RPCs of the same name.
  Status ApplyGuestTime(const v1::SetGuestTimeRequest& req) const;
  Result<v1::AddRandomnessResponse> ApplyRandomness(const v1::AddRandomnessRequest& req) const;
  Result<v1::Interface> ApplyInterface(const v1::Interface& iface) const;
  // Rehearse's NIC part (agent.proto RehearseRequest.boot_nic_mac).
  Status RehearseNic(const std::string& mac) const;
  Result<v1::Routes> ApplyRoutes(const v1::Routes& routes) const;

  const AgentServiceOptions options_;
  pod::PodSlot* const pods_;
  AgentLifecycle* const lifecycle_;
  std::atomic<ContainerOps*> containers_{nullptr};
  net::Network* network_ = nullptr;  // set before serving, read-only after
  BlockingGate blocking_;
};

}  // namespace capsule::agent::server
