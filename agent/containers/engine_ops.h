// EngineOps: the agent's container RPCs over the container engine
// (agent/engine) of the VM's pod (agent/pod). Handlers are thin: check the
// request (validate.h), take the current pod (a GuestPodPtr keeps it alive
// for the call), look the container up, make one engine call, convert
// (convert.h). Which container anchors the pod's namespaces is
// PodNamespaces' rule (agent/pod/pod_namespaces.h).
#pragma once

#include <chrono>
#include <string>

#include "agent/engine/container_manager.h"
#include "agent/engine/guest_processes.h"
#include "agent/modules/loader.h"
#include "agent/pod/pod_slot.h"
#include "agent/server/container_ops.h"

namespace capsule::agent::containers {

// Shortest container id prefix ExecGuestProcess resolves.
inline constexpr size_t kMinIdPrefix = 4;
// GetOOMEvent checks for cancellation (and a destroyed sandbox) this often.
inline constexpr std::chrono::milliseconds kOomPollInterval{500};

class EngineOps final : public server::ContainerOps {
 public:
  // Neither is owned; both must outlive the ops. `modules` loads what a
  // container's storages need (storage::ModulesFor); null: such storages
  // fail to mount unless their modules are loaded.
  EngineOps(pod::PodSlot* pods, modules::ModuleLoader* modules) : pods_(pods), modules_(modules) {}

  Result<v1::CreateContainerResponse> CreateContainer(const v1::CreateContainerRequest& req) override;
  Result<v1::StartContainerResponse> StartContainer(const v1::StartContainerRequest& req,
                                                    server::AfterAnswer& after) override;
  Status RemoveContainer(const v1::RemoveContainerRequest& req) override;
  Result<v1::ExecProcessResponse> ExecProcess(const v1::ExecProcessRequest& req) override;
  Result<v1::ExecProcessResponse> ExecGuestProcess(const v1::ExecGuestProcessRequest& req) override;
  Status SignalProcess(const v1::SignalProcessRequest& req) override;
  Status RemoveProcess(const v1::RemoveProcessRequest& req) override;
  Result<v1::WaitProcessResponse> WaitProcess(const v1::WaitProcessRequest& req,
                                              const server::CallContext& ctx) override;
  Result<v1::ListProcessesResponse> ListProcesses(const v1::ListProcessesRequest& req) override;
  Status UpdateContainer(const v1::UpdateContainerRequest& req) override;
  Result<v1::StatsContainerResponse> StatsContainer(const v1::StatsContainerRequest& req) override;
  Status PauseContainer(const v1::PauseContainerRequest& req) override;
  Status ResumeContainer(const v1::ResumeContainerRequest& req) override;
  Result<v1::WriteStreamResponse> WriteStdin(const v1::WriteStreamRequest& req,
                                             const server::CallContext& ctx) override;
  Result<v1::ReadStreamResponse> ReadStdout(const v1::ReadStreamRequest& req, const server::CallContext& ctx) override;
  Result<v1::ReadStreamResponse> ReadStderr(const v1::ReadStreamRequest& req, const server::CallContext& ctx) override;
  Status CloseStdin(const v1::CloseStdinRequest& req) override;
  Status TtyWinResize(const v1::TtyWinResizeRequest& req) override;
  Result<v1::OOMEvent> GetOOMEvent(const v1::GetOOMEventRequest& req, const server::CallContext& ctx) override;

 private:
  using PodPtr = pod::GuestPodPtr;

  // A looked-up container and the pod that keeps its engine alive.
  struct Target {
    PodPtr pod;
    engine::ContainerPtr container;
    engine::Container* operator->() const { return container.get(); }
  };

  Result<Target> Lookup(const std::string& container_id) const;
  // The current sandbox's guest processes, and the pod that keeps them alive.
  struct GuestTarget {
    PodPtr pod;
    engine::GuestProcesses* guest;
    engine::GuestProcesses* operator->() const { return guest; }
  };
  Result<GuestTarget> LookupGuest() const;
  // ExecGuestProcess's tools_container_id: a container id, the CRI name of
  // one (a running one wins over exited ones of that name), or a unique id
  // prefix of kMinIdPrefix characters or more.
  static Result<engine::ContainerPtr> FindToolsContainer(pod::GuestPod& pod, const std::string& query);
  Result<engine::ProcessIoPtr> LookupIo(const std::string& container_id, const std::string& exec_id) const;
  Result<v1::ReadStreamResponse> Read(const v1::ReadStreamRequest& req, engine::Stream stream,
                                      const server::CallContext& ctx);
  // A request's stdin_closed: the process reads EOF from the start.
  static Status CloseStdinAtCreate(engine::Container& c, const std::string& exec_id);
  Result<v1::CreateContainerResponse> CreateInPod(pod::GuestPod& pod, const std::string& id, oci::Spec spec,
                                                  const v1::CreateContainerRequest& req);

  pod::PodSlot* const pods_;
  modules::ModuleLoader* const modules_;
};

}  // namespace capsule::agent::containers
