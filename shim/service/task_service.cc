// See task_service.h. Events are queued by the handler after the call
// succeeded, and before anything that could produce a later event (the
// exit watcher starts after /tasks/start), so containerd sees them in order.
#include "shim/service/task_service.h"

#include <unistd.h>

#include "containerd/events/task.pb.h"
#include "runtime/common/logging.h"
#include "runtime/common/version.h"
#include "shim/service/proto_convert.h"

namespace capsule::shim::service {

namespace cev = ::containerd::events;
using task::ProcessPtr;

namespace {
const log::Logger kTaskServiceLog("shim.service");
// A guest that answers neither the kill nor anything else is stopped long
// before this; it bounds only the wait, not the delete.
constexpr std::chrono::milliseconds kKillAnswerWait{2000};
}  // namespace

Result<ProcessPtr> TaskService::Find(const std::string& id, const std::string& exec_id) {
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Get(id));
  return c->Find(exec_id);
}

Result<v2::CreateTaskResponse> TaskService::Create(const v2::CreateTaskRequest& req, std::optional<Deadline> deadline) {
  if (!req.checkpoint().empty()) return Unimplemented("create " + req.id() + " from a checkpoint: not supported");
  task::CreateParams params = ToCreateParams(req);
  params.deadline = deadline;  // containerd gives up then (ttrpc has no cancel message)
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Create(params));
  cev::TaskCreate ev;
  ev.set_container_id(req.id());
  ev.set_bundle(req.bundle());
  *ev.mutable_rootfs() = req.rootfs();
  ev.mutable_io()->set_stdin(req.stdin());
  ev.mutable_io()->set_stdout(req.stdout());
  ev.mutable_io()->set_stderr(req.stderr());
  ev.mutable_io()->set_terminal(req.terminal());
  ev.set_pid(c->init()->host_pid());
  events_->Publish(events::kTaskCreate, ev);
  v2::CreateTaskResponse resp;
  resp.set_pid(c->init()->host_pid());
  return resp;
}

Result<v2::StartResponse> TaskService::Start(const v2::StartRequest& req) {
  ASSIGN_OR_RETURN(ProcessPtr p, Find(req.id(), req.exec_id()));
  ASSIGN_OR_RETURN(uint32_t pid, p->Start());
  if (p->is_init()) {
    cev::TaskStart ev;
    ev.set_container_id(req.id());
    ev.set_pid(pid);
    events_->Publish(events::kTaskStart, ev);
  } else {
    cev::TaskExecStarted ev;
    ev.set_container_id(req.id());
    ev.set_exec_id(req.exec_id());
    ev.set_pid(pid);
    events_->Publish(events::kTaskExecStarted, ev);
  }
  p->WatchExit();  // only now: /tasks/exit must follow the start event
  v2::StartResponse resp;
  resp.set_pid(pid);
  return resp;
}

Result<v2::StateResponse> TaskService::State(const v2::StateRequest& req) {
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Get(req.id()));
  ASSIGN_OR_RETURN(ProcessPtr p, c->Find(req.exec_id()));
  return ToStateResponse(*c, *p);
}

Result<v2::WaitResponse> TaskService::Wait(const v2::WaitRequest& req) {
  ASSIGN_OR_RETURN(ProcessPtr p, Find(req.id(), req.exec_id()));
  const task::ExitInfo exit = p->Wait();
  v2::WaitResponse resp;
  resp.set_exit_status(exit.status);
  events::SetTimestamp(exit.exited_at_ns, resp.mutable_exited_at());
  return resp;
}

Result<Empty> TaskService::Kill(const v2::KillRequest& req, const ttrpc::CallContext& ctx) {
  {
    std::lock_guard lock(kills_mu_);
    ++kills_in_flight_[req.id()];
  }
  ctx.AfterReply([this, id = req.id()] {
    {
      std::lock_guard lock(kills_mu_);
      if (--kills_in_flight_[id] == 0) kills_in_flight_.erase(id);
    }
    kills_answered_.notify_all();
  });
  ASSIGN_OR_RETURN(std::function<void()> finish, tasks_->Kill(req.id(), req.exec_id(), req.signal(), req.all()));
  if (finish) ctx.AfterReply(std::move(finish));
  return Empty();
}

Result<v2::DeleteResponse> TaskService::Delete(const v2::DeleteRequest& req, const ttrpc::CallContext& ctx) {
  // Only after containerd gave up on the task's Create: undo it; then NOT_FOUND.
  if (req.exec_id().empty())
    tasks_->CancelCreation(req.id(), Cancelled("create task " + req.id() +
                                               ": containerd deleted the task while it was being created"));
  ASSIGN_OR_RETURN(ProcessPtr p, Find(req.id(), req.exec_id()));
  ASSIGN_OR_RETURN(task::TaskManager::Deleted deleted, tasks_->Delete(req.id(), req.exec_id()));
  if (deleted.finish) ctx.AfterReply(std::move(deleted.finish));
  {
    std::unique_lock lock(kills_mu_);
    if (!kills_answered_.wait_for(lock, kKillAnswerWait, [&] { return kills_in_flight_.count(req.id()) == 0; }))
      kTaskServiceLog.Warn("task {}: deleted with a kill still unanswered after {} ms", req.id(),
                           kKillAnswerWait.count());
  }
  const task::ExitInfo& exit = deleted.exit;
  v2::DeleteResponse resp;
  resp.set_pid(p->host_pid());
  resp.set_exit_status(exit.status);
  events::SetTimestamp(exit.exited_at_ns, resp.mutable_exited_at());
  if (p->is_init()) {  // like runc's shim: execs have no delete event
    cev::TaskDelete ev;
    ev.set_container_id(req.id());
    ev.set_id(req.id());
    ev.set_pid(resp.pid());
    ev.set_exit_status(resp.exit_status());
    *ev.mutable_exited_at() = resp.exited_at();
    events_->Publish(events::kTaskDelete, ev);
  }
  return resp;
}

Result<Empty> TaskService::Exec(const v2::ExecProcessRequest& req) {
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Get(req.id()));
  ASSIGN_OR_RETURN(std::string process_json, ExecProcessJson(req.spec()));
  io::StdioSpec stdio{req.stdin(), req.stdout(), req.stderr(), req.terminal(), req.id(), tasks_->deps().ns};
  ASSIGN_OR_RETURN(ProcessPtr p, c->AddExec(req.exec_id(), process_json, stdio));
  cev::TaskExecAdded ev;
  ev.set_container_id(req.id());
  ev.set_exec_id(req.exec_id());
  events_->Publish(events::kTaskExecAdded, ev);
  return Empty();
}

Result<Empty> TaskService::ResizePty(const v2::ResizePtyRequest& req) {
  ASSIGN_OR_RETURN(ProcessPtr p, Find(req.id(), req.exec_id()));
  RETURN_IF_ERROR(p->ResizePty(req.width(), req.height()));
  return Empty();
}

Result<Empty> TaskService::CloseIO(const v2::CloseIORequest& req) {
  ASSIGN_OR_RETURN(ProcessPtr p, Find(req.id(), req.exec_id()));
  if (req.stdin()) p->CloseStdin();
  return Empty();
}

Result<v2::PidsResponse> TaskService::Pids(const v2::PidsRequest& req) {
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Get(req.id()));
  ASSIGN_OR_RETURN(auto listed, c->Pids());
  v2::PidsResponse resp;
  for (const auto& p : listed.processes()) resp.add_processes()->set_pid(p.pid());
  return resp;
}

Result<Empty> TaskService::Update(const v2::UpdateTaskRequest& req) {
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Get(req.id()));
  ASSIGN_OR_RETURN(std::string resources, ResourcesJson(req.resources()));
  RETURN_IF_ERROR(c->Update(resources));
  return Empty();
}

Result<v2::StatsResponse> TaskService::Stats(const v2::StatsRequest& req) {
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Get(req.id()));
  ASSIGN_OR_RETURN(auto stats, c->Stats());
  v2::StatsResponse resp;
  *resp.mutable_stats() = ToStatsAny(stats);
  return resp;
}

Result<Empty> TaskService::Pause(const v2::PauseRequest& req) {
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Get(req.id()));
  RETURN_IF_ERROR(c->Pause());
  cev::TaskPaused ev;
  ev.set_container_id(req.id());
  events_->Publish(events::kTaskPaused, ev);
  return Empty();
}

Result<Empty> TaskService::Resume(const v2::ResumeRequest& req) {
  ASSIGN_OR_RETURN(task::ContainerPtr c, tasks_->Get(req.id()));
  RETURN_IF_ERROR(c->Resume());
  cev::TaskResumed ev;
  ev.set_container_id(req.id());
  events_->Publish(events::kTaskResumed, ev);
  return Empty();
}

Result<Empty> TaskService::Checkpoint(const v2::CheckpointTaskRequest& req) {
  return Unimplemented("checkpoint of " + req.id() + ": not supported by capsule");
}

Result<v2::ConnectResponse> TaskService::Connect(const v2::ConnectRequest& req) {
  v2::ConnectResponse resp;
  resp.set_shim_pid(static_cast<uint32_t>(::getpid()));
  // As runc's shim: an unknown id is not an error, its task pid is 0. For a
  // pod this is the VMM's pid, whose /proc/<pid>/ns/net CRI reads.
  if (auto c = tasks_->Get(req.id()); c.ok()) resp.set_task_pid((*c)->init()->host_pid());
  resp.set_version(kVersion);
  return resp;
}

Result<Empty> TaskService::Shutdown(const v2::ShutdownRequest&) {
  // containerd calls this after every Delete; one shim serves a whole pod.
  if (!tasks_->AcceptShutdown()) return Empty();
  request_shutdown_("containerd's Shutdown found no task left");
  return Empty();
}

void TaskService::Register(ttrpc::Server& server) {
#define CAPSULE_TASK_METHOD(Name, Req, Resp)                                                          \
  server.RegisterMethod<Req, Resp>(kTaskService, #Name,                                               \
                                   [this](const ttrpc::CallContext&, const Req& r) { return Name(r); })
  CAPSULE_TASK_METHOD(State, v2::StateRequest, v2::StateResponse);
  server.RegisterMethod<v2::CreateTaskRequest, v2::CreateTaskResponse>(
      kTaskService, "Create",
      [this](const ttrpc::CallContext& ctx, const v2::CreateTaskRequest& r) { return Create(r, ctx.deadline); });
  CAPSULE_TASK_METHOD(Start, v2::StartRequest, v2::StartResponse);
  CAPSULE_TASK_METHOD(Pids, v2::PidsRequest, v2::PidsResponse);
  CAPSULE_TASK_METHOD(Pause, v2::PauseRequest, Empty);
  CAPSULE_TASK_METHOD(Resume, v2::ResumeRequest, Empty);
  CAPSULE_TASK_METHOD(Checkpoint, v2::CheckpointTaskRequest, Empty);
  server.RegisterMethod<v2::DeleteRequest, v2::DeleteResponse>(
      kTaskService, "Delete", [this](const ttrpc::CallContext& ctx, const v2::DeleteRequest& r) { return Delete(r, ctx); });
  server.RegisterMethod<v2::KillRequest, Empty>(
      kTaskService, "Kill", [this](const ttrpc::CallContext& ctx, const v2::KillRequest& r) { return Kill(r, ctx); });
  CAPSULE_TASK_METHOD(Exec, v2::ExecProcessRequest, Empty);
  CAPSULE_TASK_METHOD(ResizePty, v2::ResizePtyRequest, Empty);
  CAPSULE_TASK_METHOD(CloseIO, v2::CloseIORequest, Empty);
  CAPSULE_TASK_METHOD(Update, v2::UpdateTaskRequest, Empty);
  CAPSULE_TASK_METHOD(Wait, v2::WaitRequest, v2::WaitResponse);
  CAPSULE_TASK_METHOD(Stats, v2::StatsRequest, v2::StatsResponse);
  CAPSULE_TASK_METHOD(Connect, v2::ConnectRequest, v2::ConnectResponse);
  CAPSULE_TASK_METHOD(Shutdown, v2::ShutdownRequest, Empty);
#undef CAPSULE_TASK_METHOD
}

}  // namespace capsule::shim::service
