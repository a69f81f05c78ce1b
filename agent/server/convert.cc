// Field-by-field copies; validation happens in agent/pod.
#include "agent/server/convert.h"

namespace capsule::agent::server {

storage::StorageSpec StorageFromProto(const ::capsule::agent::v1::Storage& s) {
  storage::StorageSpec out;
  out.driver = s.driver();
  out.source = s.source();
  out.fstype = s.fstype();
  out.options.assign(s.options().begin(), s.options().end());
  out.mount_point = s.mount_point();
  return out;
}

pod::PodSpec PodSpecFromProto(const ::capsule::agent::v1::CreateSandboxRequest& req) {
  pod::PodSpec out;
  out.id = req.sandbox_id();
  out.hostname = req.hostname();
  out.dns.assign(req.dns().begin(), req.dns().end());
  for (const auto& s : req.storages()) out.storages.push_back(StorageFromProto(s));
  out.sandbox_pidns = req.sandbox_pidns();
  out.kernel_modules.assign(req.kernel_modules().begin(), req.kernel_modules().end());
  return out;
}

}  // namespace capsule::agent::server
