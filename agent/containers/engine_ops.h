// EngineOps: the agent's container RPCs over the container engine
// (agent/engine). One engine ContainerManager per sandbox: made when
// CreateSandbox succeeds, emptied (every container stopped and removed,
// their storages unmounted) by DestroySandbox before the sandbox's own
// storages go. Handlers are thin: check the request (validate.h), look the
// container up, make one engine call, convert (convert.h). Which container
// anchors the pod's namespaces is PodNamespaces' rule (pod_namespaces.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/containers/pod_namespaces.h"
#include "agent/engine/container_manager.h"
#include "agent/engine/guest_processes.h"
#include "agent/modules/loader.h"
#include "agent/server/container_ops.h"
#include "agent/storage/storage.h"

namespace capsule::agent::containers {

// RemoveContainer with timeout 0, and DestroySandbox: how long the killed
// processes may take to be reaped.
inline constexpr std::chrono::milliseconds kDefaultRemoveTimeout{10000};
// Shortest container id prefix ExecGuestProcess resolves.
inline constexpr size_t kMinIdPrefix = 4;
// GetOOMEvent checks for cancellation (and a destroyed sandbox) this often.
inline constexpr std::chrono::milliseconds kOomPollInterval{500};

class EngineOps final : public server::ContainerOps {
 public:
  // Makes the engine for a new sandbox (tests pass a fake).
  using EngineFactory = std::function<Result<engine::ContainerManagerPtr>()>;
  // The real engine: engine::Sandbox over `options` and the process Reaper.
  static EngineFactory LinuxEngine(engine::EngineOptions options);

  // `modules` loads what a container's storages need (storage::ModulesFor);
  // null: such storages fail to mount unless their modules are loaded.
  explicit EngineOps(EngineFactory factory, modules::ModuleLoaderPtr modules = nullptr)
      : factory_(std::move(factory)), modules_(std::move(modules)) {}
  ~EngineOps() override;

  // Makes the engine and its pod holder ahead of the sandbox.
  Status Prepare() override;
  // On the prepared engine, which is taken out meanwhile: a sandbox made
  // during the rehearsal gets an engine of its own.
  Result<v1::RehearseResponse> Rehearse(const v1::RehearseRequest& req) override;
  Status SandboxCreated(const sandbox::SandboxInfo& info) override;
  Status SandboxDestroying(const sandbox::SandboxInfo& info) override;

  Result<uint32_t> AdoptPodHolder(const std::string& container_id, const std::string& hostname) override;
  Status CreateContainer(const v1::CreateContainerRequest& req) override;
  Result<v1::StartContainerResponse> StartContainer(const v1::StartContainerRequest& req) override;
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
  // One sandbox's engine and bookkeeping. Handlers hold a shared_ptr for the
  // length of their call, so a DestroySandbox racing a call never frees what
  // the call still uses.
  struct Pod {
    Pod(std::string pod_id, bool pidns, engine::ContainerManagerPtr e)
        : id(std::move(pod_id)), engine(std::move(e)), namespaces(pidns) {}
    const std::string id;
    const engine::ContainerManagerPtr engine;
    PodNamespaces namespaces;
    std::mutex create_mu;  // serialises CreateContainer: the anchor depends on the order
    std::mutex storages_mu;
    std::map<std::string, std::vector<storage::MountedStorage>> storages;  // guarded by storages_mu
    std::mutex names_mu;
    std::map<std::string, std::string> cri_names;  // container id -> CRI container name; guarded by names_mu
  };
  using PodPtr = std::shared_ptr<Pod>;

  // A looked-up container and the pod that keeps its engine alive.
  struct Target {
    PodPtr pod;
    engine::ContainerPtr container;
    engine::Container* operator->() const { return container.get(); }
  };

  Result<PodPtr> CurrentPod() const;
  // Prepare's engine, taken out, or a new one; FAILED_PRECONDITION (its
  // message starting with `who`) while a sandbox has one.
  Result<engine::ContainerManagerPtr> TakeEngine(std::string_view who);
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
  static Result<engine::ContainerPtr> FindToolsContainer(Pod& pod, const std::string& query);
  Result<engine::ProcessIoPtr> LookupIo(const std::string& container_id, const std::string& exec_id) const;
  Result<v1::ReadStreamResponse> Read(const v1::ReadStreamRequest& req, engine::Stream stream,
                                      const server::CallContext& ctx);
  Status CreateInPod(Pod& pod, const std::string& id, oci::Spec spec, const v1::CreateContainerRequest& req);
  static Status UnmountStorages(Pod& pod, const std::string& id);

  const EngineFactory factory_;
  const modules::ModuleLoaderPtr modules_;
  std::mutex rehearse_mu_;  // one rehearsal at a time: they share an id, a cgroup and a rootfs dir
  mutable std::mutex mu_;
  PodPtr pod_;  // guarded by mu_; null without a sandbox
  engine::ContainerManagerPtr prepared_;  // guarded by mu_; Prepare's, until a sandbox takes it
};

}  // namespace capsule::agent::containers
