// Process RPCs: exec, signal, wait, remove, list. Exec id "" is the
// container's init everywhere except ExecProcess and RemoveProcess.
#include "agent/containers/convert.h"
#include "agent/containers/engine_ops.h"
#include "agent/containers/validate.h"
#include "runtime/oci/spec_parser.h"

namespace capsule::agent::containers {

Result<v1::ExecProcessResponse> EngineOps::ExecProcess(const v1::ExecProcessRequest& req) {
  RETURN_IF_ERROR(CheckContainerId("container_id", req.container_id()));
  RETURN_IF_ERROR(CheckExecId("exec_id", req.exec_id(), /*allow_init=*/false));
  if (req.process_json().empty()) return InvalidArgument("process_json is required");
  auto process = oci::ParseProcess(req.process_json());
  if (!process.ok()) return std::move(process).status().WithContext("process_json");
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  ASSIGN_OR_RETURN(pid_t pid, c->Exec(req.exec_id(), *process));
  v1::ExecProcessResponse resp;
  resp.set_pid(static_cast<uint32_t>(pid));
  return resp;
}

Status EngineOps::SignalProcess(const v1::SignalProcessRequest& req) {
  RETURN_IF_ERROR(CheckContainerId("container_id", req.container_id()));
  RETURN_IF_ERROR(CheckExecId("exec_id", req.exec_id(), /*allow_init=*/true));
  RETURN_IF_ERROR(CheckSignal(req.signal()));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  // NOT_FOUND once the process exited: containerd's CRI relies on it.
  return c->Signal(req.exec_id(), static_cast<int>(req.signal()), req.all());
}

Result<v1::WaitProcessResponse> EngineOps::WaitProcess(const v1::WaitProcessRequest& req,
                                                       const server::CallContext& ctx) {
  RETURN_IF_ERROR(CheckContainerId("container_id", req.container_id()));
  RETURN_IF_ERROR(CheckExecId("exec_id", req.exec_id(), /*allow_init=*/true));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  ASSIGN_OR_RETURN(engine::ExitInfo exit, c->Wait(req.exec_id(), engine::CancelCheck([&] { return ctx.cancelled(); })));
  return WaitResponseFromExit(exit);
}

Status EngineOps::RemoveProcess(const v1::RemoveProcessRequest& req) {
  RETURN_IF_ERROR(CheckContainerId("container_id", req.container_id()));
  RETURN_IF_ERROR(CheckExecId("exec_id", req.exec_id(), /*allow_init=*/false));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  return c->RemoveProcess(req.exec_id());
}

Result<v1::ListProcessesResponse> EngineOps::ListProcesses(const v1::ListProcessesRequest& req) {
  RETURN_IF_ERROR(CheckContainerId("container_id", req.container_id()));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  ASSIGN_OR_RETURN(std::vector<engine::ProcessInfo> processes, c->ListProcesses());
  return ProcessListToProto(processes);
}

}  // namespace capsule::agent::containers
