// TaskService: containerd's `containerd.task.v2.Task` over ttrpc. Each
// handler is a few lines — look the task up, call it, publish the event —
// in the style of containerd's runc task service; the logic lives in
// shim/task (TaskManager, Container, Process). Conversions between the
// containerd protos and the shim's types are in proto_convert.h.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "containerd/task/v2/shim.pb.h"
#include "runtime/common/status.h"
#include "runtime/ttrpc/server.h"
#include "shim/events/publisher.h"
#include "shim/task/task_manager.h"

namespace capsule::shim::service {

namespace v2 = ::containerd::task::v2;
using Empty = ::google::protobuf::Empty;

inline constexpr const char* kTaskService = "containerd.task.v2.Task";

class TaskService {
 public:
  // `request_shutdown` is called when containerd's Shutdown finds no task left.
  TaskService(task::TaskManager* tasks, events::Publisher* events, std::function<void(std::string)> request_shutdown)
      : tasks_(tasks), events_(events), request_shutdown_(std::move(request_shutdown)) {}

  // Registers every method of the Task service.
  void Register(ttrpc::Server& server);

  using Deadline = std::chrono::steady_clock::time_point;
  // `deadline`: the request's (ttrpc timeout_nano), when containerd gives up.
  Result<v2::CreateTaskResponse> Create(const v2::CreateTaskRequest& req, std::optional<Deadline> deadline = std::nullopt);
  Result<v2::StartResponse> Start(const v2::StartRequest& req);
  Result<v2::StateResponse> State(const v2::StateRequest& req);
  Result<v2::WaitResponse> Wait(const v2::WaitRequest& req);
  // A kill that ends the pod's VM does so after containerd has the answer
  // (ctx.AfterReply): the holder's exit event must not overtake it.
  Result<Empty> Kill(const v2::KillRequest& req, const ttrpc::CallContext& ctx = {});
  // A container's removal from the guest runs after the answer (ctx).
  Result<v2::DeleteResponse> Delete(const v2::DeleteRequest& req, const ttrpc::CallContext& ctx = {});
  Result<Empty> Exec(const v2::ExecProcessRequest& req);
  Result<Empty> ResizePty(const v2::ResizePtyRequest& req);
  Result<Empty> CloseIO(const v2::CloseIORequest& req);
  Result<v2::PidsResponse> Pids(const v2::PidsRequest& req);
  Result<Empty> Update(const v2::UpdateTaskRequest& req);
  Result<v2::StatsResponse> Stats(const v2::StatsRequest& req);
  Result<Empty> Pause(const v2::PauseRequest& req);
  Result<Empty> Resume(const v2::ResumeRequest& req);
  Result<Empty> Checkpoint(const v2::CheckpointTaskRequest& req);
  Result<v2::ConnectResponse> Connect(const v2::ConnectRequest& req);
  Result<Empty> Shutdown(const v2::ShutdownRequest& req);

 private:
  Result<task::ProcessPtr> Find(const std::string& id, const std::string& exec_id);

  task::TaskManager* const tasks_;
  events::Publisher* const events_;
  const std::function<void(std::string)> request_shutdown_;

  // Kills not yet answered, by task id. containerd closes a task's
  // connection once its delete is answered, and a kill's answer still due
  // on it is lost ("ttrpc: closed", and StopPodSandbox fails). The guest
  // can report the exit before it answers the signal, so a delete waits
  // for those answers first (at most kKillAnswerWait).
  std::mutex kills_mu_;
  std::condition_variable kills_answered_;
  std::map<std::string, int> kills_in_flight_;  // guarded by kills_mu_
};

}  // namespace capsule::shim::service
