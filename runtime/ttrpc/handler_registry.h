// The server's table of "service/method" -> handler. Lookups name what is
// missing (unknown service vs unknown method), as ttrpc's services.go does,
// with code UNIMPLEMENTED (12).
#pragma once

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>

#include "runtime/common/status.h"
#include "runtime/ttrpc/server.h"

namespace capsule::ttrpc {

class HandlerRegistry {
 public:
  // A later registration of the same method replaces the earlier one.
  void Register(const std::string& service, const std::string& method, RawHandler handler);
  // Shared, so a running handler outlives a concurrent re-registration.
  Result<std::shared_ptr<const RawHandler>> Lookup(const std::string& service,
                                                   const std::string& method) const;

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, std::map<std::string, std::shared_ptr<const RawHandler>>> services_;  // guarded by mu_
};

}  // namespace capsule::ttrpc
