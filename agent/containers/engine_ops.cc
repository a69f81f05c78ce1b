// EngineOps: container lookups in the current pod.
#include "agent/containers/engine_ops.h"

namespace capsule::agent::containers {

Result<EngineOps::Target> EngineOps::Lookup(const std::string& container_id) const {
  ASSIGN_OR_RETURN(PodPtr pod, pods_->Current());
  ASSIGN_OR_RETURN(engine::ContainerPtr c, pod->engine().Get(container_id));
  return Target{std::move(pod), std::move(c)};
}

Result<EngineOps::GuestTarget> EngineOps::LookupGuest() const {
  ASSIGN_OR_RETURN(PodPtr pod, pods_->Current());
  engine::GuestProcesses* guest = pod->engine().Guest();
  if (guest == nullptr) return Unimplemented("this agent's engine cannot start processes outside the containers");
  return GuestTarget{std::move(pod), guest};
}

Result<engine::ProcessIoPtr> EngineOps::LookupIo(const std::string& container_id, const std::string& exec_id) const {
  if (container_id.empty()) {
    ASSIGN_OR_RETURN(GuestTarget g, LookupGuest());
    return g->Io(exec_id);
  }
  ASSIGN_OR_RETURN(Target t, Lookup(container_id));
  return t->Io(exec_id);
}

Status EngineOps::CloseStdinAtCreate(engine::Container& c, const std::string& exec_id) {
  ASSIGN_OR_RETURN(engine::ProcessIoPtr io, c.Io(exec_id));
  return io->CloseStdin().WithContext("stdin_closed");
}

}  // namespace capsule::agent::containers
