// ContainerApiTest: the fixture of the gRPC container API tests, run once
// per AgentEndpoint kind (INSTANTIATE_TEST_SUITE_P with a factory). The
// endpoint is made once per binary and shared by every test; each test gets
// its own sandbox (CreateSandbox in SetUp, DestroySandbox in TearDown) and
// is checked for leaks after it: the agent's mount table is back to what it
// was before the test and no container cgroup is left.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "tests/agent/containers/container_api_client.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::testing {

using EndpointFactory = Result<AgentEndpointPtr> (*)();

class ContainerApiTest : public ::testing::TestWithParam<EndpointFactory> {
 protected:
  void SetUp() override;
  void TearDown() override;

  ApiClient& api() { return *api_; }
  AgentEndpoint& endpoint() { return *endpoint_; }
  // Replaces the test's sandbox with one whose containers share a pid
  // namespace (CreateSandbox.sandbox_pidns).
  void RecreateSandbox(bool sandbox_pidns);
  // Number of cgroups under the agent's container parent (cgroup.stat).
  int CgroupDescendants();
  std::vector<std::string> AgentMounts();
  std::string CgroupDir(const std::string& container_id) const {
    return endpoint_->cgroup_parent_dir() + "/" + container_id;
  }

 private:
  AgentEndpoint* endpoint_ = nullptr;
  std::optional<ApiClient> api_;
  std::vector<std::string> mounts_before_;
  bool sandbox_ = false;
};

// The endpoint a factory made for this binary (made on first use, stopped
// when the test program ends); null with the error recorded when it failed.
AgentEndpoint* SharedEndpoint(EndpointFactory factory, Status* error);

// ASSERT_OK / EXPECT_OK come from tests/support/status_matchers.h.
// The call failed with `code` and its message mentions `needle`.
#define EXPECT_ERROR(expr, want_code, needle)                                         \
  do {                                                                           \
    const ::capsule::Status capsule_st_ = ::capsule::testing::StatusOf(expr);         \
    EXPECT_EQ(capsule_st_.code(), want_code) << #expr << ": " << capsule_st_.ToString(); \
    EXPECT_NE(capsule_st_.message().find(needle), std::string::npos)            \
        << #expr << ": message lacks \"" << (needle) << "\": " << capsule_st_.message(); \
  } while (0)

}  // namespace capsule::agent::testing
