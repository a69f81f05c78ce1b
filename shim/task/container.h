// Container: one containerd task in a pod's VM. Create exposes its rootfs
// and host bind mounts under the VM's share (or, on the dense device set,
// on erofs disks: dense_files.h), rewrites its spec for the guest and has
// the agent create it; it owns its init Process and its execs. Delete
// removes it from the guest and undoes every host mount and disk. Resource
// calls (Pids, Stats, Update, Pause/Resume) go to the agent, except that the
// pod's sandbox container pauses and resumes the whole VM.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "capsule/agent/v1/agent.pb.h"
#include "shim/io/stdio_uri.h"
#include "shim/mount/mounter.h"
#include "shim/pod/sandbox.h"
#include "shim/task/dense_files.h"
#include "shim/task/guest_spec.h"
#include "shim/task/process.h"

namespace capsule::shim::task {

// How long the agent may take to kill a removed container's processes.
inline constexpr uint32_t kRemoveTimeoutSeconds = 10;

struct ContainerParams {
  std::string id;
  std::string bundle;
  nlohmann::json host_spec;                 // the bundle's config.json
  std::vector<mount::MountSpec> rootfs;     // containerd's rootfs mounts (no target)
  std::string image_cache_dir;              // runtime.image_cache_dir (dense device set)
  uint64_t image_cache_max_bytes = 0;       // runtime.image_cache_max_mib, in bytes; 0: unbounded
  io::StdioSpec stdio;
  // The pod's sandbox container (or a pod of one): pause/resume is the VM's.
  bool sandbox_container = false;
  ExitObserver on_exit;
};

class Container {
 public:
  // On failure nothing is left: no host mount, no share dir, no guest container.
  static Result<std::unique_ptr<Container>> Create(ContainerParams params, pod::SandboxPtr sandbox,
                                                   mount::Mounter* mounter);
  ~Container();
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  const std::string& id() const { return p_.id; }
  const std::string& bundle() const { return p_.bundle; }
  const pod::SandboxPtr& sandbox() const { return sandbox_; }
  bool sandbox_container() const { return p_.sandbox_container; }
  // CRI's sandbox container, played by the guest's pod holder (no image,
  // no process of its own).
  bool pod_holder() const { return pod_holder_; }
  const ProcessPtr& init() const { return init_; }

  // exec_id "" is the init. NOT_FOUND names the missing process.
  Result<ProcessPtr> Find(const std::string& exec_id);
  // ALREADY_EXISTS for a used exec id; FAILED_PRECONDITION unless running.
  Result<ProcessPtr> AddExec(const std::string& exec_id, const std::string& process_json, const io::StdioSpec& stdio);
  // An exec: Process::Delete, then forgotten. The init: see DeleteContainer.
  Result<ExitInfo> DeleteExec(const std::string& exec_id);
  // The init must be stopped (or never started): the container is deleted
  // for containerd from here on (a second delete is NOT_FOUND) and its exit
  // answered. FinishDelete, which the caller runs next or after its reply,
  // removes it from the guest and unmounts what Create mounted.
  Result<ExitInfo> DeleteContainer();
  void FinishDelete();
  // The shim is going away: every process not yet stopped is reported
  // killed, so no Wait stays blocked.
  void AbandonProcesses();

  Result<agentclient::v1::ListProcessesResponse> Pids();
  Result<agentclient::v1::StatsContainerResponse> Stats();
  Status Update(const std::string& resources_json);
  // The agent (or QMP) call runs without the lock, so State, Find and
  // Delete answer meanwhile; a second Pause or Resume then fails.
  Status Pause();
  Status Resume();
  bool paused() const;

 private:
  Container(ContainerParams params, pod::SandboxPtr sandbox) : p_(std::move(params)), sandbox_(std::move(sandbox)) {}
  Status MountRootfs(mount::Mounter* mounter, const std::string& target);
  Status MountShares(mount::Mounter* mounter, const std::vector<ShareBind>& binds);
  // Dense device set: the rootfs and mounts images plugged, and the
  // storages that make them the container's files in the guest; emptyDir
  // binds leave `guest` as local volumes (its spec binds them instead).
  Result<std::vector<agentclient::v1::Storage>> PlugDense(mount::Mounter* mounter, GuestSpec* guest);
  Status PlugImage(const std::string& path, bool own);
  void UnplugDisks();
  Result<agentclient::v1::CreateContainerResponse> CreateInAgent(const std::string& spec_json,
                                                                 std::vector<agentclient::v1::Storage> storages,
                                                                 bool stdin_closed);
  Status RemoveFromAgent();
  Status UnmountAll();
  std::string Rel(std::string_view sub) const { return p_.id + "/" + std::string(sub); }

  const ContainerParams p_;
  const pod::SandboxPtr sandbox_;
  ProcessPtr init_;
  std::vector<mount::ScopedMount> mounts_;  // rootfs first; unmounted in reverse
  std::vector<std::string> disks_;          // dense: serials of its plugged disks
  // Dense: filled at create, before the init can start; its exit watcher
  // copies them back (dense_files.h).
  std::shared_ptr<std::vector<TerminationMessageFile>> termination_files_ =
      std::make_shared<std::vector<TerminationMessageFile>>();
  bool in_agent_ = false;
  bool pod_holder_ = false;

  mutable std::mutex mu_;
  std::map<std::string, ProcessPtr> execs_;  // guarded by mu_
  bool paused_ = false;                      // guarded by mu_
  bool pause_change_ = false;                // guarded by mu_: a Pause or Resume is in flight
  bool deleted_ = false;                     // guarded by mu_
};
using ContainerPtr = std::shared_ptr<Container>;

}  // namespace capsule::shim::task
