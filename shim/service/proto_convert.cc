// See proto_convert.h.
#include "shim/service/proto_convert.h"

#include "runtime/oci/spec_parser.h"
#include "shim/events/publisher.h"

namespace capsule::shim::service {

namespace types = ::containerd::v1::types;

std::vector<mount::MountSpec> ToMountSpecs(
    const google::protobuf::RepeatedPtrField<containerd::types::Mount>& mounts) {
  std::vector<mount::MountSpec> out;
  for (const auto& m : mounts) {
    mount::MountSpec s;
    s.type = m.type();
    s.source = m.source();
    s.options.assign(m.options().begin(), m.options().end());
    out.push_back(std::move(s));
  }
  return out;
}

task::CreateParams ToCreateParams(const containerd::task::v2::CreateTaskRequest& req) {
  task::CreateParams p;
  p.id = req.id();
  p.bundle = req.bundle();
  p.rootfs = ToMountSpecs(req.rootfs());
  p.terminal = req.terminal();
  p.stdin_path = req.stdin();
  p.stdout_path = req.stdout();
  p.stderr_path = req.stderr();
  return p;
}

types::Status ToTaskStatus(task::ProcessState state, bool paused) {
  switch (state) {
    case task::ProcessState::kCreated: return types::CREATED;
    case task::ProcessState::kRunning: return paused ? types::PAUSED : types::RUNNING;
    case task::ProcessState::kStopped:
    case task::ProcessState::kDeleted: return types::STOPPED;
  }
  return types::UNKNOWN;
}

containerd::task::v2::StateResponse ToStateResponse(const task::Container& c, const task::Process& p) {
  const task::ProcessSnapshot snap = p.Snapshot();
  containerd::task::v2::StateResponse r;
  r.set_id(c.id());
  r.set_exec_id(p.exec_id());
  r.set_bundle(c.bundle());
  r.set_pid(snap.host_pid);
  r.set_status(ToTaskStatus(snap.state, c.paused()));
  r.set_stdin(p.stdio().stdin_path);
  r.set_stdout(p.stdio().stdout_path);
  r.set_stderr(p.stdio().stderr_path);
  r.set_terminal(p.stdio().terminal);
  if (snap.exit) {
    r.set_exit_status(snap.exit->status);
    events::SetTimestamp(snap.exit->exited_at_ns, r.mutable_exited_at());
  }
  return r;
}

google::protobuf::Any ToStatsAny(const capsule::agent::v1::StatsContainerResponse& stats) {
  return events::PackBare(stats.metrics());
}

Result<std::string> ExecProcessJson(const google::protobuf::Any& spec) {
  if (spec.value().empty()) return InvalidArgument("exec spec: empty (want an OCI Process as JSON)");
  auto parsed = oci::ParseProcess(spec.value());
  if (!parsed.ok()) return std::move(parsed).status().WithContext("exec spec (" + spec.type_url() + ")");
  return spec.value();
}

Result<std::string> ResourcesJson(const google::protobuf::Any& resources) {
  if (resources.value().empty()) return InvalidArgument("update: resources are empty (want LinuxResources JSON)");
  auto parsed = oci::ParseLinuxResources(resources.value());
  if (!parsed.ok()) return std::move(parsed).status().WithContext("update resources (" + resources.type_url() + ")");
  return resources.value();
}

}  // namespace capsule::shim::service
