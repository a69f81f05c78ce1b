// Process RPCs: exec, signal, wait, remove, list. Exec id "" is the
// container's init everywhere except ExecProcess and RemoveProcess;
// container id "" is the guest itself (ExecGuestProcess's processes).
#include <linux/capability.h>
#include <signal.h>

#include <map>
#include <vector>

#include "agent/containers/convert.h"
#include "agent/containers/engine_ops.h"
#include "agent/containers/validate.h"
#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"
#include "runtime/oci/spec_parser.h"

namespace capsule::agent::containers {
namespace {

const log::Logger kOpsProcessLog("agent.containers");

Result<oci::Process> ParseProcessJson(const std::string& json) {
  if (json.empty()) return InvalidArgument("process_json is required");
  auto process = oci::ParseProcess(json);
  if (!process.ok()) return std::move(process).status().WithContext("process_json");
  return process;
}

// Inside its pid namespace CAP_SYS_PTRACE reaches the tenant's own
// processes; in the guest's it would reach the agent, and through it the
// guest's root.
std::optional<oci::Capabilities> WithoutPtrace(std::optional<oci::Capabilities> caps) {
  if (!caps) return caps;
  for (auto* set : {&caps->bounding, &caps->effective, &caps->inheritable, &caps->permitted, &caps->ambient})
    std::erase(*set, CAP_SYS_PTRACE);
  return caps;
}

}  // namespace

Result<v1::ExecProcessResponse> EngineOps::ExecProcess(const v1::ExecProcessRequest& req) {
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  RETURN_IF_ERROR(CheckExecId("exec_id", req.exec_id(), /*allow_init=*/false));
  ASSIGN_OR_RETURN(oci::Process process, ParseProcessJson(req.process_json()));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  ASSIGN_OR_RETURN(pid_t pid, c->Exec(req.exec_id(), process));
  if (req.stdin_closed()) {
    if (Status st = CloseStdinAtCreate(*c.container, req.exec_id()); !st.ok()) {
      // Not left running with a stdin nobody will close: the host takes
      // the start as failed and never removes this exec.
      (void)c->Signal(req.exec_id(), SIGKILL, false);
      if (c->Wait(req.exec_id()).ok()) (void)c->RemoveProcess(req.exec_id());
      return st;
    }
  }
  v1::ExecProcessResponse resp;
  resp.set_pid(static_cast<uint32_t>(pid));
  return resp;
}

Result<v1::ExecProcessResponse> EngineOps::ExecGuestProcess(const v1::ExecGuestProcessRequest& req) {
  RETURN_IF_ERROR(CheckExecId("exec_id", req.exec_id(), /*allow_init=*/false));
  if (!req.tools_container_id().empty())
    RETURN_IF_ERROR(pod::CheckId("tools_container_id", req.tools_container_id()));
  ASSIGN_OR_RETURN(oci::Process process, ParseProcessJson(req.process_json()));
  ASSIGN_OR_RETURN(GuestTarget g, LookupGuest());
  engine::GuestTools tools;
  if (!req.tools_container_id().empty()) {
    auto c = FindToolsContainer(*g.pod, req.tools_container_id());
    if (!c.ok()) return std::move(c).status().WithContext("tools_container_id");
    tools.container_id = (*c)->id();
    ASSIGN_OR_RETURN(tools.root.rootfs, (*c)->RootfsPath());
    tools.root.confined = !req.tools_as_guest_root();
    if (tools.root.confined) {
      // The tenant could have changed every file of its container, so they
      // run with no more than the container's own init has.
      ASSIGN_OR_RETURN(engine::Confinement init, (*c)->InitConfinement());
      process.user = init.user;
      process.capabilities = WithoutPtrace(std::move(init.capabilities));
      process.no_new_privileges = init.no_new_privileges;
      tools.seccomp = std::move(init.seccomp);
      tools.root.masked_paths = std::move(init.masked_paths);
      tools.root.readonly_paths = std::move(init.readonly_paths);
    }
  }
  // Operators' access outside the containers is worth a line in the guest's
  // log (the VM console, which the shim keeps). The program only: its
  // arguments may carry secrets.
  kOpsProcessLog.Info(
      "guest process {}: \"{}\" with {} argument(s){}", req.exec_id(),
      process.args.empty() ? std::string() : process.args[0].substr(0, 256),
      process.args.empty() ? 0 : process.args.size() - 1,
      req.tools_container_id().empty()
          ? ""
          : ", tools from container " + req.tools_container_id() +
                (req.tools_as_guest_root() ? " as the guest's root (asked for)"
                                           : " as its init runs (uid " + std::to_string(process.user.uid) + ")"));
  ASSIGN_OR_RETURN(pid_t pid, g->Exec(req.exec_id(), process, tools));
  v1::ExecProcessResponse resp;
  resp.set_pid(static_cast<uint32_t>(pid));
  return resp;
}

Result<engine::ContainerPtr> EngineOps::FindToolsContainer(pod::GuestPod& pod, const std::string& query) {
  if (auto exact = pod.engine().Get(query); exact.ok()) return exact;
  std::vector<engine::ContainerPtr> named, prefixed;
  const std::map<std::string, std::string> names = pod.CriNames();
  for (const engine::ContainerPtr& c : pod.engine().List()) {
    auto name = names.find(c->id());
    if (name != names.end() && name->second == query) named.push_back(c);
    if (query.size() >= kMinIdPrefix && c->id().compare(0, query.size(), query) == 0) prefixed.push_back(c);
  }
  if (named.size() > 1) {
    std::vector<engine::ContainerPtr> running;
    for (const auto& c : named)
      if (c->state() == engine::ContainerState::kRunning) running.push_back(c);
    if (running.size() == 1) return running.front();
  }
  const auto& found = named.empty() ? prefixed : named;
  if (found.size() == 1) return found.front();
  if (found.empty())
    return NotFound("no container \"" + query + "\" in sandbox " + pod.id() + " (by id, CRI name or id prefix)")
        .WithReason(reason::kContainerNotFound);
  std::string ids;
  for (const auto& c : found) ids += (ids.empty() ? "" : ", ") + c->id();
  return InvalidArgument("\"" + query + "\" names " + std::to_string(found.size()) + " containers: " + ids);
}

Status EngineOps::SignalProcess(const v1::SignalProcessRequest& req) {
  RETURN_IF_ERROR(CheckProcessTarget(req.container_id(), req.exec_id(), /*allow_init=*/true));
  RETURN_IF_ERROR(CheckSignal(req.signal()));
  if (req.container_id().empty()) {
    ASSIGN_OR_RETURN(GuestTarget g, LookupGuest());
    return g->Signal(req.exec_id(), static_cast<int>(req.signal()), req.all());
  }
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  // NOT_FOUND once the process exited: containerd's CRI relies on it.
  return c->Signal(req.exec_id(), static_cast<int>(req.signal()), req.all());
}

Result<v1::WaitProcessResponse> EngineOps::WaitProcess(const v1::WaitProcessRequest& req,
                                                       const server::CallContext& ctx) {
  RETURN_IF_ERROR(CheckProcessTarget(req.container_id(), req.exec_id(), /*allow_init=*/true));
  const engine::CancelCheck cancel([&] { return ctx.cancelled(); });
  if (req.container_id().empty()) {
    ASSIGN_OR_RETURN(GuestTarget g, LookupGuest());
    ASSIGN_OR_RETURN(engine::ExitInfo exit, g->Wait(req.exec_id(), cancel));
    return WaitResponseFromExit(exit);
  }
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  ASSIGN_OR_RETURN(engine::ExitInfo exit, c->Wait(req.exec_id(), cancel));
  return WaitResponseFromExit(exit);
}

Status EngineOps::RemoveProcess(const v1::RemoveProcessRequest& req) {
  RETURN_IF_ERROR(CheckProcessTarget(req.container_id(), req.exec_id(), /*allow_init=*/false));
  if (req.container_id().empty()) {
    ASSIGN_OR_RETURN(GuestTarget g, LookupGuest());
    return g->RemoveProcess(req.exec_id());
  }
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  return c->RemoveProcess(req.exec_id());
}

Result<v1::ListProcessesResponse> EngineOps::ListProcesses(const v1::ListProcessesRequest& req) {
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  ASSIGN_OR_RETURN(std::vector<engine::ProcessInfo> processes, c->ListProcesses());
  return ProcessListToProto(processes);
}

}  // namespace capsule::agent::containers
