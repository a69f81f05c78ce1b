// NetnsGuard: puts the calling thread into a network namespace given by path
// (a bind-mounted nsfs file such as CNI's /var/run/netns/cni-...) and puts it
// back into its previous one on destruction. Sockets and taps opened while
// the guard lives belong to the target namespace and stay there.
#pragma once

#include <string>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::network {

class NetnsGuard {
 public:
  // setns(CLONE_NEWNET) on this thread only. NOT_FOUND names the path when
  // it does not exist. The guard must be destroyed on the same thread.
  static Result<NetnsGuard> Enter(const std::string& netns_path);
  ~NetnsGuard();

  NetnsGuard(NetnsGuard&& other) noexcept = default;
  NetnsGuard& operator=(NetnsGuard&&) = delete;
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;

 private:
  explicit NetnsGuard(UniqueFd original) : original_(std::move(original)) {}
  UniqueFd original_;  // the thread's namespace before Enter(); empty once moved from
};

}  // namespace capsule::network
