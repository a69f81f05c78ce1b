// Container RPCs: create (storages, namespace joins), start, remove, update,
// stats, pause and resume.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "agent/containers/convert.h"
#include "agent/containers/engine_ops.h"
#include "agent/containers/validate.h"
#include "agent/engine/metrics_proto.h"
#include "agent/modules/modprobe_helper.h"
#include "agent/net/link_stats.h"
#include "agent/server/convert.h"
#include "agent/storage/share_release.h"
#include "runtime/common/elapsed.h"
#include "runtime/common/logging.h"
#include "runtime/oci/spec_parser.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent::containers {
namespace {

const log::Logger kOpsContainerLog("containers");

// CreateContainerRequest.storages, validated all before any is mounted and
// unmounted again (RAII) if a later step fails.
constexpr int kMaxStorages = 64;
// The CRI plugin's annotation naming a container as the kubelet knows it.
constexpr const char* kCriContainerName = "io.kubernetes.cri.container-name";

Result<std::vector<storage::MountedStorage>> MountStorages(
    const google::protobuf::RepeatedPtrField<v1::Storage>& storages, modules::ModuleLoader* modules) {
  if (storages.size() > kMaxStorages)
    return InvalidArgument(fmt::format("storages: {} entries, at most {}", storages.size(), kMaxStorages));
  std::vector<storage::StorageSpec> specs;
  for (int i = 0; i < storages.size(); ++i) {
    specs.push_back(server::StorageFromProto(storages[i]));
    RETURN_IF_ERROR(storage::ValidateStorage(specs.back(), fmt::format("storages[{}]", i)));
  }
  if (auto needed = storage::ModulesFor(specs); !needed.empty() && modules != nullptr)
    RETURN_IF_ERROR_CTX(modules->Load(needed), "storages' modules");
  std::vector<storage::MountedStorage> mounted;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto m = storage::MountedStorage::Mount(specs[i]);
    if (!m.ok()) return std::move(m).status().WithContext(fmt::format("storages[{}]", i));
    mounted.push_back(std::move(m).value());
  }
  return mounted;
}

bool MayAdministerNetwork(const oci::Spec& spec) {
  constexpr int kCapNetAdmin = 12;  // linux/capability.h
  const auto& caps = spec.process.capabilities;
  return caps && std::find(caps->bounding.begin(), caps->bounding.end(), kCapNetAdmin) != caps->bounding.end();
}

}  // namespace

Result<v1::CreateContainerResponse> EngineOps::CreateContainer(const v1::CreateContainerRequest& req) {
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  if (req.oci_spec_json().empty()) return InvalidArgument("oci_spec_json is required");
  ASSIGN_OR_RETURN(PodPtr pod, pods_->Current());
  auto spec = oci::ParseSpec(req.oci_spec_json());
  if (!spec.ok()) return std::move(spec).status().WithContext("oci_spec_json");
  return CreateInPod(*pod, req.container_id(), std::move(spec).value(), req);
}

Result<v1::CreateContainerResponse> EngineOps::CreateInPod(pod::GuestPod& pod, const std::string& id, oci::Spec spec,
                                                           const v1::CreateContainerRequest& req) {
  auto role = pod::RoleFromAnnotations(spec);
  if (!role.ok()) return std::move(role).status().WithContext("oci_spec_json");
  auto lock = pod.SerializeCreation();
  const auto t0 = std::chrono::steady_clock::now();
  if (pod.engine().Get(id).ok()) return AlreadyExists("container " + id + " already exists");
  ASSIGN_OR_RETURN(pod::NamespaceJoinPlan plan, pod.namespaces().Plan(id, *role, req.sandbox_pidns(), &spec));
  ASSIGN_OR_RETURN(std::vector<storage::MountedStorage> mounts, MountStorages(req.storages(), modules_));
  if (MayAdministerNetwork(spec)) modules::LoadNetAdminBaseline();
  const auto t_storages = std::chrono::steady_clock::now();
  engine::CreateOptions options;
  options.share_namespaces_from = plan.share_from;
  options.share_types = plan.share_types;
  ASSIGN_OR_RETURN(engine::ContainerPtr created, pod.engine().Create(id, spec, options));  // `mounts` unmount on failure
  if (req.stdin_closed()) {
    if (Status st = CloseStdinAtCreate(*created, ""); !st.ok()) {
      if (Status rm = pod.engine().Remove(id, pod::kDefaultRemoveTimeout); !rm.ok())
        kOpsContainerLog.Error("container {}: not removed after its stdin could not be closed: {}", id, rm.ToString());
      return st;
    }
  }
  pod.namespaces().Created(id, plan);
  // The host logs these: a console line would cost the create about a ms.
  kOpsContainerLog.Debug("container {} created in sandbox {} ({}{} storages) in {:.1f} ms, storages {:.1f} ms", id,
                         pod.id(), plan.anchor ? "namespace anchor, " : "joins " + plan.share_from + ", ",
                         mounts.size(), MsSince(t0), MsBetween(t0, t_storages));
  auto name = spec.annotations.find(kCriContainerName);
  pod.AddContainer(id, std::move(mounts), name != spec.annotations.end() ? name->second : "");
  const engine::CreateTimings engine_ms = created->create_timings();
  v1::CreateContainerResponse resp;
  resp.set_handled_us(MicrosField(MsSince(t0)));
  resp.set_storages_us(MicrosField(MsBetween(t0, t_storages)));
  resp.set_plan_us(MicrosField(engine_ms.plan_ms));
  resp.set_cgroup_us(MicrosField(engine_ms.cgroup_ms));
  resp.set_fork_us(MicrosField(engine_ms.fork_ms));
  resp.set_setup_us(MicrosField(engine_ms.setup_ms));
  return resp;
}

Result<v1::StartContainerResponse> EngineOps::StartContainer(const v1::StartContainerRequest& req,
                                                             server::AfterAnswer& after) {
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  ASSIGN_OR_RETURN(pid_t pid, c->Start(/*hold_go=*/true));
  after.Add([c] { c->ReleaseHeldGo(); });  // the pod too stays alive until then
  v1::StartContainerResponse resp;
  resp.set_pid(static_cast<uint32_t>(pid));
  resp.set_handled_us(MicrosField(MsSince(t0)));
  return resp;
}

Status EngineOps::RemoveContainer(const v1::RemoveContainerRequest& req) {
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  ASSIGN_OR_RETURN(PodPtr pod, pods_->Current());
  const auto timeout = req.timeout() == 0 ? pod::kDefaultRemoveTimeout : std::chrono::seconds(req.timeout());
  // A debug process borrowing the container's tools would keep its
  // filesystem mounted in a namespace of its own: it goes first.
  if (engine::GuestProcesses* guest = pod->engine().Guest())
    RETURN_IF_ERROR(guest->EndToolUsers(req.container_id(), timeout));
  RETURN_IF_ERROR(pod->engine().Remove(req.container_id(), timeout));
  RETURN_IF_ERROR(pod->ForgetContainer(req.container_id()));
  // Not fatal: the host then detaches its mounts lazily instead.
  const std::string share = std::string(guest_abi::kSharedFsGuestPath) + "/" + req.container_id();
  if (Status st = storage::ReleaseSharedSubtree(share); !st.ok())
    kOpsContainerLog.Warn("container {} removed, but its share is still referenced: {}", req.container_id(),
                          st.ToString());
  return Status::Ok();
}

Status EngineOps::UpdateContainer(const v1::UpdateContainerRequest& req) {
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  auto resources = oci::ParseLinuxResources(req.resources_json());
  if (!resources.ok()) return std::move(resources).status().WithContext("resources_json");
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  return c->Update(*resources);
}

Result<v1::StatsContainerResponse> EngineOps::StatsContainer(const v1::StatsContainerRequest& req) {
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  ASSIGN_OR_RETURN(engine::CgroupMetrics metrics, c->Stats());
  v1::StatsContainerResponse resp;
  engine::ToProto(metrics, resp.mutable_metrics());
  // The VM is the pod: its interfaces are every container's network.
  auto network = net::ReadInterfaceStats();
  if (network.ok()) {
    NetworkStatsToProto(*network, &resp);
  } else {
    kOpsContainerLog.Warn("stats of container {}: network counters: {}", req.container_id(),
                          network.status().message());
  }
  return resp;
}

Status EngineOps::PauseContainer(const v1::PauseContainerRequest& req) {
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  return c->Pause();
}

Status EngineOps::ResumeContainer(const v1::ResumeContainerRequest& req) {
  RETURN_IF_ERROR(pod::CheckId("container_id", req.container_id()));
  ASSIGN_OR_RETURN(Target c, Lookup(req.container_id()));
  return c->Resume();
}

}  // namespace capsule::agent::containers
