// See handler_registry.h.
#include "runtime/ttrpc/handler_registry.h"

#include <mutex>

namespace capsule::ttrpc {

void HandlerRegistry::Register(const std::string& service, const std::string& method,
                               RawHandler handler) {
  std::unique_lock lock(mu_);
  services_[service][method] = std::make_shared<const RawHandler>(std::move(handler));
}

Result<std::shared_ptr<const RawHandler>> HandlerRegistry::Lookup(
    const std::string& service, const std::string& method) const {
  std::shared_lock lock(mu_);
  auto svc = services_.find(service);
  if (svc == services_.end()) return Unimplemented("ttrpc: unknown service " + service);
  auto m = svc->second.find(method);
  if (m == svc->second.end()) {
    return Unimplemented("ttrpc: unknown method " + method + " of service " + service);
  }
  return m->second;
}

}  // namespace capsule::ttrpc
