// Version: who answers (agent build, API revision, guest kernel), when it
// became ready (the host's boot-time measurements), and the guest's wall
// clock and vsock CID (a pooled or cloned VM's freshness).
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <sys/ioctl.h>
#include <time.h>

#include "agent/server/agent_service.h"
#include "agent/server/rpc_util.h"
#include "agent/system/guest_system.h"
#include "runtime/common/unique_fd.h"
#include "runtime/common/version.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent::server {
namespace {

int64_t WallClockNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The CID the guest's vsock transport took from its device; 0 without one.
uint32_t LocalCid() {
  UniqueFd fd(::open("/dev/vsock", O_RDONLY | O_CLOEXEC));
  unsigned int cid = 0;
  if (!fd || ::ioctl(fd.get(), IOCTL_VM_SOCKETS_GET_LOCAL_CID, &cid) != 0 || cid == VMADDR_CID_ANY) return 0;
  return cid;
}

}  // namespace

grpc::Status AgentService::Version(Ctx*, const v1::VersionRequest*, v1::VersionResponse* resp) {
  return Guarded("Version", [&]() -> Status {
    resp->set_agent_version(kVersion);
    resp->set_api_version(guest_abi::kAgentApiVersion);
    resp->set_kernel_release(system::KernelRelease());
    resp->set_ready_monotonic_us(lifecycle_->ready_monotonic_us());
    resp->set_wall_clock_unix_ns(WallClockNs());
    resp->set_local_cid(LocalCid());
    return Status::Ok();
  });
}

}  // namespace capsule::agent::server
