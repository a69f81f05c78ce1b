// Stopping a container whose init handles SIGTERM, through containerd 1.6's
// CRI, the way runc does it: the stop's SIGTERM goes to the init alone, which
// decides for itself; a stop its caller gives up on leaves the container
// running; the SIGKILL after the grace period is reported at once (status
// 137), not after the output of what the init started has drained; and the
// processes the init started go with it, in the pod's pid namespace as in
// one of the container's own. Once per pid mode, one VM boot each; the
// fixture checks nothing is left on the host after it.
#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using std::chrono::steady_clock;

constexpr milliseconds kCommandTimeout{60000};
// A stop returns this soon after its grace period, or after the init's own
// exit: containerd's kill, the guest's, the exit's report and containerd's
// delete of the task. It was 10 s more when the report waited for output
// that a child of the init kept open.
constexpr milliseconds kStopLatency{1000};

class CriStopE2eTest : public CriE2eTest, public ::testing::WithParamInterface<v1::NamespaceMode> {
 protected:
  std::string Cli() const { return std::string(std::getenv("CAPSULE_BUILD_DIR")) + "/runtime/cli/capsule-runtime"; }
  // Every process of the guest (its own pid namespace sees all the pod's),
  // with the tools of container `tools`.
  std::string GuestProcesses(const std::string& pod_id, const std::string& tools) {
    auto ps = RunCommand({Cli(), "--config", env_->config_path(), "exec", pod_id, "--tools-from", tools, "--", "ps",
                          "-o", "pid,args"},
                         kCommandTimeout);
    EXPECT_OK(ps);
    if (!ps.ok()) return "";
    EXPECT_EQ(ps->exit_code, 0) << ps->out << ps->err;
    return ps->out;
  }
  // Waits until `needle` runs in the guest: the init set its trap first.
  void AwaitInGuest(const std::string& pod_id, const std::string& tools, const std::string& needle) {
    std::string ps;
    for (int i = 0; i < 60; ++i) {
      ps = GuestProcesses(pod_id, tools);
      if (ps.find(needle) != std::string::npos) return;
      ::usleep(250 * 1000);
    }
    FAIL() << needle << " never ran in the guest:\n" << ps;
  }
  Result<std::string> Start(const std::string& pod_id, const v1::PodSandboxConfig& pod, const std::string& name,
                            const std::string& script) {
    ContainerOptions c;
    c.name = name;
    c.image = kBusyboxImage;
    c.command = {"sh", "-c", script};
    c.log_path = name + ".log";
    c.pid = GetParam();
    ASSIGN_OR_RETURN(std::string id, cri_->CreateContainer(pod_id, pod, c));
    RETURN_IF_ERROR(cri_->StartContainer(id));
    return id;
  }
  // StopContainer, timed.
  milliseconds TimedStop(const std::string& id, int64_t grace_seconds) {
    const auto t0 = steady_clock::now();
    Status st = cri_->StopContainer(id, grace_seconds);
    const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0);
    EXPECT_OK(st);
    return took;
  }
  void ExpectExited(const std::string& id, int32_t exit_code) {
    auto status = cri_->ContainerStatus(id);
    ASSERT_OK(status);
    EXPECT_EQ(status->status().state(), v1::CONTAINER_EXITED);
    EXPECT_EQ(status->status().exit_code(), exit_code);
  }
};

TEST_P(CriStopE2eTest, AnInitThatHandlesSigtermDecidesItselfAndItsChildrenGoWithIt) {
  const v1::PodSandboxConfig pod = Pod("stop-pod", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto tools = StartContainer(*pod_id, pod, "tools", {"sleep", "3600"});
  ASSERT_OK(tools);

  // An init that ignores SIGTERM while its foreground child runs (a shell
  // runs its trap once the child is done).
  auto ignores = Start(*pod_id, pod, "ignores", "trap 'echo ignored-term' TERM; sleep 7301");
  ASSERT_OK(ignores);
  ASSERT_NO_FATAL_FAILURE(AwaitInGuest(*pod_id, *tools, "sleep 7301"));

  // A stop whose caller gives up after 1 s of a 3 s grace period fails with
  // the caller's deadline and leaves the container running: the SIGTERM
  // reached the init alone, and the init chose to go on.
  Status cut = cri_->StopContainer(*ignores, 3, milliseconds(1000));
  EXPECT_EQ(cut.code(), Code::kDeadlineExceeded) << cut.ToString();
  ::usleep(1000 * 1000);  // a container the SIGTERM wrongly ended would be gone by now
  auto running = cri_->ContainerStatus(*ignores);
  ASSERT_OK(running);
  EXPECT_EQ(running->status().state(), v1::CONTAINER_RUNNING);
  EXPECT_NE(GuestProcesses(*pod_id, *tools).find("sleep 7301"), std::string::npos) << "the init's child died";

  // A stop to its end: containerd sends no second SIGTERM, waits the whole
  // grace period, then SIGKILLs the init, and hears of its exit at once.
  const milliseconds took = TimedStop(*ignores, 2);
  EXPECT_GE(took, milliseconds(2000)) << "the grace period was cut short";
  EXPECT_LT(took, milliseconds(2000) + kStopLatency) << "the stop outlasted its grace period by "
                                                     << (took - milliseconds(2000)).count() << " ms";
  ExpectExited(*ignores, 137);
  EXPECT_EQ(GuestProcesses(*pod_id, *tools).find("sleep 7301"), std::string::npos) << "the init's child outlived it";

  // An init whose handler exits: status 0, well within its grace period,
  // although the child it leaves behind holds the container's stdout.
  auto handles = Start(*pod_id, pod, "handles", "trap 'echo handled-term; exit 0' TERM; sleep 7302 & wait");
  ASSERT_OK(handles);
  ASSERT_NO_FATAL_FAILURE(AwaitInGuest(*pod_id, *tools, "sleep 7302"));
  const milliseconds quick = TimedStop(*handles, 10);
  std::cout << "stop past a 2 s grace period: " << took.count() << " ms; stop ended by the init's handler: "
            << quick.count() << " ms\n";
  EXPECT_LT(quick, kStopLatency) << "the stop waited for more than the init's exit";
  ExpectExited(*handles, 0);
  auto log = ReadFile(logs_ + "/handles.log");
  ASSERT_OK(log);
  EXPECT_NE(log->find(" stdout F handled-term"), std::string::npos) << *log;
  const std::string after = GuestProcesses(*pod_id, *tools);
  EXPECT_EQ(after.find("sleep 7302"), std::string::npos) << "the init's child outlived it:\n" << after;

  for (const auto& id : {*ignores, *handles}) {
    Status removed = cri_->RemoveContainer(id);
    EXPECT_OK(removed);
  }
  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

INSTANTIATE_TEST_SUITE_P(PidModes, CriStopE2eTest, ::testing::Values(v1::POD, v1::CONTAINER),
                         [](const ::testing::TestParamInfo<v1::NamespaceMode>& mode) {
                           return mode.param == v1::POD ? std::string("PodPidNamespace")
                                                        : std::string("ContainerPidNamespace");
                         });

}  // namespace
}  // namespace capsule::testing
