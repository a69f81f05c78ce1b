// `capsule-runtime exec` latency on one CRI pod of containerd 1.6: an
// operator's `exec POD --tools-from tools -- true` (CLI start, pod lookup,
// agent dial and token, ExecGuestProcess, wait, remove, CLI exit) against
// CRI ExecSync of `true` in the same pod's container (kubectl exec's path:
// containerd, the shim, the agent), CAPSULE_BENCH_RUNS times each (default
// 20) after one warm-up. Prints p50/p90/max and the p50 ratio. Asserts only
// that every run succeeded. `make bench` runs it.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "tests/e2e/bench_stats.h"
#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;

class GuestExecBench : public CriE2eTest {};

TEST_F(GuestExecBench, OperatorExecAgainstCriExecSyncOnOnePod) {
  const char* runs_env = std::getenv("CAPSULE_BENCH_RUNS");
  const int runs = std::max(1, runs_env != nullptr ? std::atoi(runs_env) : 20);
  const v1::PodSandboxConfig pod = Pod("exec-bench", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto tools = StartContainer(*pod_id, pod, "tools", {"sleep", "3600"});
  ASSERT_OK(tools);
  const std::vector<std::string> exec = {std::string(std::getenv("CAPSULE_BUILD_DIR")) + "/runtime/cli/capsule-runtime",
                                         "--config", env_->config_path(), "exec", *pod_id, "--tools-from", "tools",
                                         "--", "true"};
  std::vector<double> operator_ms, cri_ms;
  for (int i = 0; i <= runs; ++i) {
    const auto t0 = Clock::now();
    auto r = RunCommand(exec, milliseconds(60000));
    const auto t1 = Clock::now();
    ASSERT_OK(r);
    ASSERT_EQ(r->exit_code, 0) << r->err;
    auto s = cri_->ExecSync(*tools, {"true"}, 60);
    const auto t2 = Clock::now();
    ASSERT_OK(s);
    ASSERT_EQ(s->exit_code, 0);
    if (i == 0) continue;  // warm-up
    operator_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    cri_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  const Summary op = Summarize(operator_ms), cri = Summarize(cri_ms);
  std::cout << fmt::format("\nexec latency on one pod, {} runs each (ms):\n", runs)
            << fmt::format("  capsule-runtime exec --tools-from -- true  p50 {:7.1f}  p90 {:7.1f}  max {:7.1f}\n", op.p50,
                           op.p90, op.max)
            << fmt::format("  CRI ExecSync true (kubectl exec's path)    p50 {:7.1f}  p90 {:7.1f}  max {:7.1f}\n", cri.p50,
                           cri.p90, cri.max)
            << fmt::format("  ratio operator/CRI at p50: {:.2f}\n", op.p50 / cri.p50);
  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

}  // namespace
}  // namespace capsule::testing
