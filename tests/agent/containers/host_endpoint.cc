// The agent process, its rootfs and scratch dirs, and its cgroup parent
// (removed again when the endpoint goes).
#include "tests/agent/containers/host_endpoint.h"

#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <sstream>

#include "tests/agent/support/busybox_rootfs.h"

namespace capsule::agent::testing {
namespace {

std::string Cgroup2Root() {
  struct statfs st{};
  if (::statfs("/sys/fs/cgroup", &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC) return "/sys/fs/cgroup";
  return "/sys/fs/cgroup/unified";
}

bool HasControllers(const std::string& root, std::initializer_list<const char*> wanted) {
  auto text = ReadFile(root + "/cgroup.controllers");
  if (!text.ok()) return false;
  for (const char* w : wanted) {
    std::istringstream in(*text);
    std::string c;
    bool found = false;
    while (in >> c) found = found || c == w;
    if (!found) return false;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<HostEndpoint>> HostEndpoint::Start(const std::vector<std::string>& extra_args) {
  std::unique_ptr<HostEndpoint> ep(new HostEndpoint());
  ASSIGN_OR_RETURN(TempDir rootfs, TempDir::Create("agent-api-rootfs"));
  RETURN_IF_ERROR(BuildBusyboxRootfs(rootfs.path()));
  ep->rootfs_.emplace(std::move(rootfs));
  ASSIGN_OR_RETURN(TempDir scratch, TempDir::Create("agent-api-scratch"));
  ep->scratch_.emplace(std::move(scratch));
  ep->cgroup_root_ = Cgroup2Root();
  ep->cgroup_parent_ = "capsule-api-test-" + std::to_string(::getpid()) + "-" + std::to_string(::time(nullptr));
  ep->resource_controllers_ = HasControllers(ep->cgroup_root_, {"memory", "pids", "cpu"});
  std::vector<std::string> args = {"--cgroup-root", ep->cgroup_root_, "--cgroup-parent", ep->cgroup_parent_};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  ASSIGN_OR_RETURN(ep->agent_, AgentUnderTest::Start(args));
  return ep;
}

HostEndpoint::~HostEndpoint() {
  agent_.reset();  // SIGTERM: the agent tears its sandbox down first
  ::rmdir(cgroup_parent_dir().c_str());
}

bool HostEndpoint::WatchesMount(const std::string& mount_point) const {
  for (const std::string& dir : {rootfs(), scratch_dir()}) {
    if (mount_point == dir || mount_point.starts_with(dir + "/")) return true;
  }
  return false;
}

Result<AgentEndpointPtr> StartHostEndpoint() {
  ASSIGN_OR_RETURN(std::unique_ptr<HostEndpoint> ep, HostEndpoint::Start());
  return AgentEndpointPtr(std::move(ep));
}

}  // namespace capsule::agent::testing
