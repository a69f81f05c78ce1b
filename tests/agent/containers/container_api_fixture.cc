// Shared endpoint per factory, per-test sandbox, and the leak checks.
#include "tests/agent/containers/container_api_fixture.h"
#include "tests/support/status_matchers.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace capsule::agent::testing {
namespace {

struct Endpoints {
  std::mutex mu;
  std::map<EndpointFactory, AgentEndpointPtr> made;   // guarded by mu
  std::map<EndpointFactory, Status> failed;           // guarded by mu
};

Endpoints& AllEndpoints() {
  static Endpoints e;  // emptied by the environment below before statics go
  return e;
}

// Stops every agent (or VM) before the test program's statics go.
class EndpointEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard lock(AllEndpoints().mu);
    AllEndpoints().made.clear();
  }
};

[[maybe_unused]] ::testing::Environment* const kEndpointEnvironment =
    ::testing::AddGlobalTestEnvironment(new EndpointEnvironment);  // gtest owns it

int ParseDescendants(const std::string& cgroup_stat) {
  const std::string key = "nr_descendants ";
  size_t at = cgroup_stat.find(key);
  return at == std::string::npos ? -1 : std::stoi(cgroup_stat.substr(at + key.size()));
}

}  // namespace

AgentEndpoint* SharedEndpoint(EndpointFactory factory, Status* error) {
  Endpoints& all = AllEndpoints();
  std::lock_guard lock(all.mu);
  if (auto it = all.made.find(factory); it != all.made.end()) return it->second.get();
  if (auto it = all.failed.find(factory); it != all.failed.end()) {
    *error = it->second;
    return nullptr;
  }
  auto made = factory();
  if (!made.ok()) {
    *error = all.failed[factory] = made.status();
    return nullptr;
  }
  return (all.made[factory] = std::move(made).value()).get();
}

void ContainerApiTest::SetUp() {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the agent mounts, makes namespaces and cgroups";
  Status error;
  endpoint_ = SharedEndpoint(GetParam(), &error);
  ASSERT_NE(endpoint_, nullptr) << "no agent endpoint: " << error.ToString();
  api_.emplace(*endpoint_);
  mounts_before_ = AgentMounts();
  // The test's name, minus the "/Param" suffix a sandbox id may not hold.
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  name = name.substr(0, std::min<size_t>(name.find('/'), 60));
  ASSERT_OK(api_->CreateSandbox("pod-" + name));
  sandbox_ = true;
}

void ContainerApiTest::RecreateSandbox(bool sandbox_pidns) {
  ASSERT_OK(api_->DestroySandbox());
  ASSERT_OK(api_->CreateSandbox("pod-pidns", sandbox_pidns));
}

void ContainerApiTest::TearDown() {
  if (!sandbox_) return;
  EXPECT_OK(api_->DestroySandbox());
  EXPECT_EQ(AgentMounts(), mounts_before_) << "mounts left in the agent's mount namespace";
  EXPECT_EQ(CgroupDescendants(), 0) << "container cgroups left under " << endpoint_->cgroup_parent_dir();
}

int ContainerApiTest::CgroupDescendants() {
  auto stat = api_->ReadFile(endpoint_->cgroup_parent_dir() + "/cgroup.stat");
  if (!stat.ok()) return stat.status().code() == Code::kNotFound ? 0 : -1;  // no container made one yet
  return ParseDescendants(*stat);
}

std::vector<std::string> ContainerApiTest::AgentMounts() {
  auto info = api_->ReadFile("/proc/self/mountinfo");
  EXPECT_OK(info);
  if (!info.ok()) return {};
  std::vector<std::string> out;
  for (auto& m : MountPoints(*info)) {
    if (endpoint_->WatchesMount(m)) out.push_back(std::move(m));
  }
  return out;
}

}  // namespace capsule::agent::testing
