// Thread-local netns switching with setns(2).
#include "runtime/network/netns.h"

#include <fcntl.h>
#include <sched.h>

#include <cstdlib>

#include "runtime/common/logging.h"

namespace capsule::network {

Result<NetnsGuard> NetnsGuard::Enter(const std::string& netns_path) {
  // thread-self, not self: setns moves only this thread.
  UniqueFd original(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!original) return ErrnoStatus("open /proc/thread-self/ns/net");
  UniqueFd target(::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!target) return ErrnoStatus("open netns " + netns_path);
  if (::setns(target.get(), CLONE_NEWNET) != 0) return ErrnoStatus("setns into netns " + netns_path);
  return NetnsGuard(std::move(original));
}

NetnsGuard::~NetnsGuard() {
  if (!original_) return;
  if (::setns(original_.get(), CLONE_NEWNET) != 0) {
    // Going on would run this thread's later network calls in the pod's
    // namespace: far worse than stopping.
    log::Logger("network").Error("setns back to the original netns failed (errno {}); aborting", errno);
    std::abort();
  }
}

}  // namespace capsule::network
