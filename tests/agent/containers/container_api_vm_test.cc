// The container API tests against capsule-agent as PID 1 of a real pod VM
// (one TCG boot for the whole binary), reached over vsock: the host suite's
// bodies plus what only the VM can run (memory/pids/cpu limits, OOM events).
#include "tests/agent/containers/container_api_fixture.h"
#include "tests/agent/containers/vm_endpoint.h"

namespace capsule::agent::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Vm, ContainerApiTest, ::testing::Values(&StartVmEndpoint),
                         [](const auto&) { return std::string("GuestAgent"); });

}  // namespace
}  // namespace capsule::agent::testing
