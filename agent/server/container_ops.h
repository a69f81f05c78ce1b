// The seam between the agent's gRPC service and the container engine
// (agent/engine/). The service validates nothing container-specific: it
// hands each container RPC's request to ContainerOps and maps the Status.
// Every method defaults to UNIMPLEMENTED, so the engine overrides what it
// supports and the rest keeps answering UNIMPLEMENTED.
//
// The implementation over agent/engine is agent/containers/engine_ops.h,
// plugged in by agent/app (handed to AgentService::SetContainerOps before
// serving). The pod the containers live in, and its engine, are agent/pod's:
// the sandbox RPCs make and end it, the container RPCs only use it.
//
// Threading: methods are called concurrently from gRPC's threads; blocking
// calls (WaitProcess, ReadStdout/ReadStderr, WriteStdin, GetOOMEvent) should
// return when ctx.cancelled() turns true (the host gave up or the agent shuts
// down). Each holds a server thread while it blocks: the service admits at
// most ServerLimits::max_blocking_calls of them at once (grpc_server.h).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "capsule/agent/v1/agent.pb.h"
#include "runtime/common/status.h"

namespace capsule::agent::server {

namespace v1 = ::capsule::agent::v1;

// Per-call facts a long-running call needs, without gRPC types.
class CallContext {
 public:
  virtual ~CallContext() = default;
  virtual bool cancelled() const = 0;
};

// Work a call leaves for after its answer has left, run by the RPC's
// reactor once gRPC has handed the final status to the transport (OnDone):
// a started container's exec, which on a one-vCPU guest would otherwise take
// the vCPU before the answer's bytes leave; DestroySandbox's power-off. Runs
// once, at Run() or at destruction, in the order added.
class AfterAnswer {
 public:
  AfterAnswer() = default;
  AfterAnswer(const AfterAnswer&) = delete;
  AfterAnswer& operator=(const AfterAnswer&) = delete;
  ~AfterAnswer() { Run(); }

  void Add(std::function<void()> fn) { fns_.push_back(std::move(fn)); }
  void Run() {
    std::vector<std::function<void()>> fns;
    fns.swap(fns_);
    for (auto& fn : fns) fn();
  }

 private:
  std::vector<std::function<void()>> fns_;
};

class ContainerOps {
 public:
  virtual ~ContainerOps() = default;

  virtual Result<v1::CreateContainerResponse> CreateContainer(const v1::CreateContainerRequest&) {
    return Missing("CreateContainer");
  }
  // The init execs after the answer: its go is added to `after`.
  virtual Result<v1::StartContainerResponse> StartContainer(const v1::StartContainerRequest&, AfterAnswer& /*after*/) {
    return Missing("StartContainer");
  }
  virtual Status RemoveContainer(const v1::RemoveContainerRequest&) { return Missing("RemoveContainer"); }
  virtual Result<v1::ExecProcessResponse> ExecProcess(const v1::ExecProcessRequest&) { return Missing("ExecProcess"); }
  // A process in the guest outside every container; the process RPCs then
  // address it with container_id "".
  virtual Result<v1::ExecProcessResponse> ExecGuestProcess(const v1::ExecGuestProcessRequest&) {
    return Missing("ExecGuestProcess");
  }
  virtual Status SignalProcess(const v1::SignalProcessRequest&) { return Missing("SignalProcess"); }
  virtual Status RemoveProcess(const v1::RemoveProcessRequest&) { return Missing("RemoveProcess"); }
  virtual Result<v1::WaitProcessResponse> WaitProcess(const v1::WaitProcessRequest&, const CallContext&) {
    return Missing("WaitProcess");
  }
  virtual Result<v1::ListProcessesResponse> ListProcesses(const v1::ListProcessesRequest&) {
    return Missing("ListProcesses");
  }
  virtual Status UpdateContainer(const v1::UpdateContainerRequest&) { return Missing("UpdateContainer"); }
  virtual Result<v1::StatsContainerResponse> StatsContainer(const v1::StatsContainerRequest&) {
    return Missing("StatsContainer");
  }
  virtual Status PauseContainer(const v1::PauseContainerRequest&) { return Missing("PauseContainer"); }
  virtual Status ResumeContainer(const v1::ResumeContainerRequest&) { return Missing("ResumeContainer"); }
  virtual Result<v1::WriteStreamResponse> WriteStdin(const v1::WriteStreamRequest&, const CallContext&) {
    return Missing("WriteStdin");
  }
  virtual Result<v1::ReadStreamResponse> ReadStdout(const v1::ReadStreamRequest&, const CallContext&) {
    return Missing("ReadStdout");
  }
  virtual Result<v1::ReadStreamResponse> ReadStderr(const v1::ReadStreamRequest&, const CallContext&) {
    return Missing("ReadStderr");
  }
  virtual Status CloseStdin(const v1::CloseStdinRequest&) { return Missing("CloseStdin"); }
  virtual Status TtyWinResize(const v1::TtyWinResizeRequest&) { return Missing("TtyWinResize"); }
  virtual Result<v1::OOMEvent> GetOOMEvent(const v1::GetOOMEventRequest&, const CallContext&) {
    return Missing("GetOOMEvent");
  }

 protected:
  static Status Missing(std::string_view rpc) {
    return Unimplemented(std::string(rpc) + " is not implemented by this agent's container engine");
  }
};

using ContainerOpsPtr = std::unique_ptr<ContainerOps>;

}  // namespace capsule::agent::server
