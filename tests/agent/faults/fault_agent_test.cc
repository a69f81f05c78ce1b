// The real capsule-agent-faults (--no-init, unix socket) with --fault: a
// held RPC answers DEADLINE_EXCEEDED at its caller's deadline and not
// before, a delayed one answers late, a once-rule only holds the first
// call, every other RPC answers at once meanwhile; the production
// capsule-agent carries no fault switch.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>

#include "runtime/common/file_util.h"
#include "tests/agent/server/agent_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string BuildDir() {
  const char* b = std::getenv("CAPSULE_BUILD_DIR");
  return b != nullptr ? b : ".";
}

std::unique_ptr<grpc::ClientContext> CtxWithin(milliseconds t) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + t);
  return ctx;
}

milliseconds Since(Clock::time_point t) { return std::chrono::duration_cast<milliseconds>(Clock::now() - t); }

TEST(FaultAgent, HeldAndDelayedRpcsWhileTheOthersAnswer) {
  auto agent = AgentUnderTest::Start({"--fault", "Version:hang,Check:delay=600:once"},
                                     BuildDir() + "/agent/faults/capsule-agent-faults");
  ASSERT_OK(agent);
  v1::Agent::Stub& stub = (*agent)->stub();

  // Held: the caller's deadline ends it, and nothing answers before.
  auto t0 = Clock::now();
  v1::VersionResponse version;
  grpc::Status st = stub.Version(CtxWithin(milliseconds(800)).get(), v1::VersionRequest(), &version);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_GE(Since(t0), milliseconds(800));

  // Meanwhile another RPC answers at once (the hold takes one thread only).
  auto held = std::async(std::launch::async, [&] {
    v1::VersionResponse r;
    return stub.Version(CtxWithin(milliseconds(3000)).get(), v1::VersionRequest(), &r).error_code();
  });
  ::usleep(100 * 1000);
  t0 = Clock::now();
  v1::ReadGuestFileRequest read;
  read.set_path("/proc/self/status");
  read.set_max_bytes(64);
  v1::ReadGuestFileResponse file;
  EXPECT_OK(stub.ReadGuestFile(CtxWithin(milliseconds(5000)).get(), read, &file));
  EXPECT_LT(Since(t0), milliseconds(2000));
  EXPECT_EQ(held.get(), grpc::StatusCode::DEADLINE_EXCEEDED);

  // Delayed once: the first Check answers after 600 ms, the next at once.
  v1::CheckResponse check;
  t0 = Clock::now();
  ASSERT_OK(stub.Check(CtxWithin(milliseconds(10000)).get(), v1::CheckRequest(), &check));
  EXPECT_GE(Since(t0), milliseconds(600));
  t0 = Clock::now();
  ASSERT_OK(stub.Check(CtxWithin(milliseconds(10000)).get(), v1::CheckRequest(), &check));
  EXPECT_LT(Since(t0), milliseconds(500));

  auto code = (*agent)->Stop();
  ASSERT_OK(code);
  EXPECT_EQ(*code, 0) << "a held call must not keep the agent from stopping";
}

// What is installed and packed into capsule-initrd.img has no fault switch:
// none of the fault code, not even its log lines, is in the binary.
TEST(FaultAgent, TheProductionAgentHasNoFaultSwitch) {
  auto prod = ReadFile(BuildDir() + "/agent/capsule-agent");
  ASSERT_OK(prod);
  auto faults = ReadFile(BuildDir() + "/agent/faults/capsule-agent-faults");
  ASSERT_OK(faults);
  for (const char* marker : {"fault switch armed", "until its caller gives up"}) {
    EXPECT_NE(faults->find(marker), std::string::npos) << marker << ": the test build should have it";
    EXPECT_EQ(prod->find(marker), std::string::npos) << marker << ": found in the production agent";
  }
}

}  // namespace
}  // namespace capsule::agent::testing
