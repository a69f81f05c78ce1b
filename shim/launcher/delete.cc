// delete: hook clean-up, leftover socket/address removal, DeleteResponse.
#include "shim/launcher/delete.h"

#include <time.h>
#include <unistd.h>

#include "containerd/task/v2/shim.pb.h"
#include "runtime/common/logging.h"
#include "shim/launcher/bundle.h"
#include "shim/launcher/socket.h"

namespace capsule::shim::launcher {
namespace {

const log::Logger kDeleteLog("shim.delete");

// Removes the socket named by <bundle>/address when nothing listens on it.
void RemoveStaleSocket(const std::string& bundle) {
  auto path = GroupSocketPath(bundle);
  if (!path.ok()) {
    if (path.status().code() != Code::kNotFound) kDeleteLog.Warn("{}", path.status().ToString());
    return;
  }
  if (CanConnect(*path)) {
    kDeleteLog.Info("shim socket {} is still served; keeping it", *path);
    return;
  }
  if (::unlink(path->c_str()) == 0) {
    kDeleteLog.Info("removed stale shim socket {}", *path);
  } else if (errno != ENOENT) {
    kDeleteLog.Warn("{}", ErrnoStatus("remove stale shim socket " + *path).ToString());
  }
}

}  // namespace

Result<std::string> DeleteShim(const DeleteRequest& req) {
  uint32_t pid = 0;
  if (req.cleanup) {
    CleanupContext ctx{req.flags.namespace_, req.flags.id, req.bundle, req.flags.address};
    ASSIGN_OR_RETURN(pid, req.cleanup(ctx));
  }
  RemoveStaleSocket(req.bundle);
  const std::string address_file = req.bundle + "/" + kAddressFile;
  if (::unlink(address_file.c_str()) != 0 && errno != ENOENT)
    kDeleteLog.Warn("{}", ErrnoStatus("remove " + address_file).ToString());

  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  containerd::task::v2::DeleteResponse resp;
  resp.set_pid(pid);
  resp.set_exit_status(kDeadShimExitStatus);
  resp.mutable_exited_at()->set_seconds(now.tv_sec);
  resp.mutable_exited_at()->set_nanos(static_cast<int32_t>(now.tv_nsec));
  return resp.SerializeAsString();
}

}  // namespace capsule::shim::launcher
