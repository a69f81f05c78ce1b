// The container API tests against capsule-agent as a host process, plus
// what only a host agent can show cheaply: the blocking-call limit and a
// pod with many more blocking calls than gRPC has pollers.
#include <signal.h>

#include <chrono>
#include <thread>

#include "tests/agent/containers/container_api_fixture.h"
#include "tests/agent/containers/host_endpoint.h"

namespace capsule::agent::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Host, ContainerApiTest, ::testing::Values(&StartHostEndpoint),
                         [](const auto&) { return std::string("HostAgent"); });

using ManyBlockingCallsTest = ContainerApiTest;
INSTANTIATE_TEST_SUITE_P(Host, ManyBlockingCallsTest, ::testing::Values(&StartHostEndpoint),
                         [](const auto&) { return std::string("HostAgent"); });

// 40 execs, each with WaitProcess + ReadStdout + ReadStderr blocked at once
// (120 blocking calls): all are served, and the calls that end them still
// get through.
TEST_P(ManyBlockingCallsTest, DozensOfExecsWithThreeBlockingCallsEachAllComplete) {
  constexpr int kExecs = 40;
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  for (int i = 0; i < kExecs; ++i) {
    ASSERT_OK(api().Exec("c1", "e" + std::to_string(i), ApiClient::Process({"sh", "-c", "read x; echo $x; echo e >&2"})));
  }
  std::vector<std::string> out(kExecs), err(kExecs);
  std::vector<int> status(kExecs, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kExecs; ++i) {
    const std::string id = "e" + std::to_string(i);
    threads.emplace_back([&, i, id] { out[i] = api().ReadAll("c1", id).value_or("<failed>"); });
    threads.emplace_back([&, i, id] { err[i] = api().ReadAll("c1", id, true).value_or("<failed>"); });
    threads.emplace_back([&, i, id] {
      auto w = api().Wait("c1", id);
      status[i] = w.ok() ? w->status() : -2;
    });
  }
  for (int i = 0; i < kExecs; ++i) {
    const std::string id = "e" + std::to_string(i);
    EXPECT_OK(api().Write("c1", id, "line" + std::to_string(i) + "\n"));
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kExecs; ++i) {
    EXPECT_EQ(out[i], "line" + std::to_string(i) + "\n");
    EXPECT_EQ(err[i], "e\n");
    EXPECT_EQ(status[i], 0);
  }
}

// An agent of its own with --max-blocking-calls 3: the fourth blocking call
// is refused at once, and the non-blocking call that ends the first three
// still runs.
TEST(BlockingCallLimitTest, ExtraBlockingCallsAreRefusedAndTheRestStillRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  auto ep = HostEndpoint::Start({"--max-blocking-calls", "3"});
  ASSERT_OK(ep);
  ApiClient api(**ep);
  ASSERT_OK(api.CreateSandbox("limits"));
  ASSERT_OK(api.Create("c1", api.Spec({"sleep", "1000"})));
  ASSERT_OK(api.Start("c1"));
  std::vector<int> status(3, -1);
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(api.Exec("c1", "w" + std::to_string(i), ApiClient::Process({"sleep", "1000"})));
  }
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&, i] {
      // A probe below holds a slot for an instant: a wait that came then is
      // refused like any extra call, and comes again.
      auto w = api.Wait("c1", "w" + std::to_string(i));
      for (int again = 0; !w.ok() && w.status().code() == Code::kResourceExhausted && again < 1000; ++again) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        w = api.Wait("c1", "w" + std::to_string(i));
      }
      status[i] = w.ok() ? w->status() : -2;
    });
  }
  // The three waits are admitted asynchronously: probe until the gate is
  // full. A probe that gets in answers NOT_FOUND at once (no such exec).
  Status refused;
  for (int attempt = 0; attempt < 20000; ++attempt) {
    refused = api.Read("c1", "no-such-exec", false).status();
    if (refused.code() == Code::kResourceExhausted) break;
    std::this_thread::yield();
  }
  EXPECT_EQ(refused.code(), Code::kResourceExhausted) << refused.ToString();
  EXPECT_NE(refused.message().find("3 blocking calls"), std::string::npos) << refused.message();
  for (int i = 0; i < 3; ++i) EXPECT_OK(api.Signal("c1", "w" + std::to_string(i), SIGKILL));
  for (auto& t : waiters) t.join();
  for (int s : status) EXPECT_EQ(s, 128 + SIGKILL);
  EXPECT_OK(api.DestroySandbox());
}

}  // namespace
}  // namespace capsule::agent::testing
