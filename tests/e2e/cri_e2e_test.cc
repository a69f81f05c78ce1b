// Capsule as a CRI runtime handler of a real containerd 1.6: one pod = one
// real QEMU microVM (two boots in all). A pod with two busybox containers
// sharing its pid namespace: ExecSync, status, logs at the CRI log path,
// stats, StopContainer, Stop/RemovePodSandbox; and a containerd restart
// while a pod runs (the shim is reconnected through its address file and
// the pod still answers and stops). Nothing of ours is left after each.
//
// MiniContainerd rather than ContainerdHarness here: it already configures
// CRI for this host (pause image, cgroupfs, restrict_oom_score_adj) and can
// restart containerd on the same state.
#include <gtest/gtest.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/cri/mini_containerd.h"
#include "tests/support/images/test_images.h"

namespace capsule::testing {
namespace {

using cri::ContainerOptions;
using cri::CriClient;
using cri::PodOptions;
namespace v1 = ::runtime::v1;
using std::chrono::milliseconds;

constexpr const char* kCriNs = "k8s.io";

class CriE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CAPSULE_SHIM_HAS_VM) GTEST_SKIP() << "the shim was built without runtime/vm: it cannot boot VMs";
    auto env = E2eEnv::Create();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    env_.emplace(std::move(*env));
    MiniContainerdOptions o;
    o.path_prepend = {E2eEnv::ShimDir()};
    o.extra_config = R"(
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.capsule]
      runtime_type = "io.containerd.capsule.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.capsule.options]
        ConfigPath = ")" + env_->config_path() + "\"\n";
    auto c = MiniContainerd::Start(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ctrd_ = std::move(*c);
    ASSERT_TRUE(ctrd_->ImportImage(TestImageTar("busybox")).ok());
    ASSERT_TRUE(ctrd_->ImportImage(TestImageTar("pause")).ok());
    Connect();
    logs_ = ctrd_->dir() + "/pod-logs";
    ASSERT_TRUE(MkdirAll(logs_).ok());
  }
  void TearDown() override {
    cri_.reset();
    if (!ctrd_) return;
    auto leaks = env_->Leaks(ctrd_->address(), {ctrd_->dir()}, kCriNs, pods_);
    EXPECT_TRUE(leaks.empty()) << leaks.size() << " leaks, first: " << leaks.front();
    if (!leaks.empty()) env_->Reap(ctrd_->address(), {ctrd_->dir()});
    if (HasFailure()) {
      auto log = ReadFile(ctrd_->log_path()).value_or("");
      ADD_FAILURE() << "containerd log tail:\n" << log.substr(log.size() > 200000 ? log.size() - 200000 : 0);
    }
  }
  void Connect() {
    auto client = CriClient::Connect(ctrd_->address(), milliseconds(20000));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    cri_ = std::move(*client);
    cri_->set_call_timeout(milliseconds(180000));  // a cold boot under TCG
  }
  v1::PodSandboxConfig Pod(const std::string& name) {
    PodOptions pod;
    pod.name = name;
    pod.log_directory = logs_;
    pod.runtime_handler = "capsule";
    return cri::MakePodConfig(pod);
  }
  Result<std::string> RunPod(const v1::PodSandboxConfig& config) {
    auto id = cri_->RunPod(config, "capsule");
    if (id.ok()) pods_.push_back(*id);
    return id;
  }
  Result<std::string> StartContainer(const std::string& pod_id, const v1::PodSandboxConfig& pod,
                                     const std::string& name, const std::vector<std::string>& command) {
    ContainerOptions c;
    c.name = name;
    c.image = kBusyboxImage;
    c.command = command;
    c.log_path = name + ".log";
    ASSIGN_OR_RETURN(std::string id, cri_->CreateContainer(pod_id, pod, c));
    RETURN_IF_ERROR(cri_->StartContainer(id));
    return id;
  }

  std::optional<E2eEnv> env_;
  std::unique_ptr<MiniContainerd> ctrd_;
  std::unique_ptr<CriClient> cri_;
  std::string logs_;
  std::vector<std::string> pods_;
};

TEST_F(CriE2eTest, PodWithTwoContainersExecLogsStatsAndStop) {
  const v1::PodSandboxConfig pod = Pod("capsule-pod");
  auto pod_id = RunPod(pod);
  ASSERT_TRUE(pod_id.ok()) << pod_id.status().ToString();
  auto pstatus = cri_->PodStatus(*pod_id);
  ASSERT_TRUE(pstatus.ok()) << pstatus.status().ToString();
  EXPECT_EQ(pstatus->status().state(), v1::SANDBOX_READY);

  auto c1 = StartContainer(*pod_id, pod, "one", {"sh", "-c", "echo started-one; exec sleep 3600"});
  ASSERT_TRUE(c1.ok()) << c1.status().ToString();
  auto c2 = StartContainer(*pod_id, pod, "two", {"sleep", "3601"});
  ASSERT_TRUE(c2.ok()) << c2.status().ToString();

  auto cstatus = cri_->ContainerStatus(*c1);
  ASSERT_TRUE(cstatus.ok()) << cstatus.status().ToString();
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_RUNNING);

  auto exec = cri_->ExecSync(*c1, {"echo", "hi"}, 30);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_EQ(exec->exit_code, 0);
  EXPECT_EQ(exec->out, "hi\n");
  exec = cri_->ExecSync(*c1, {"sh", "-c", "echo oops >&2; exit 3"}, 30);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_EQ(exec->exit_code, 3);
  EXPECT_EQ(exec->err, "oops\n");

  // One pid namespace per pod (CRI's default): "two" sees "one"'s sleep.
  exec = cri_->ExecSync(*c2, {"ps"}, 30);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_NE(exec->out.find("sleep 3600"), std::string::npos) << exec->out;
  EXPECT_NE(exec->out.find("sleep 3601"), std::string::npos) << exec->out;

  auto stats = cri_->ListContainerStats(*pod_id);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->size(), 2u);

  ASSERT_TRUE(cri_->StopContainer(*c1, 2).ok());
  cstatus = cri_->ContainerStatus(*c1);
  ASSERT_TRUE(cstatus.ok());
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_EXITED);
  auto log = ReadFile(logs_ + "/one.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_NE(log->find(" stdout F started-one"), std::string::npos) << *log;

  ASSERT_TRUE(cri_->RemoveContainer(*c1).ok());
  ASSERT_TRUE(cri_->StopPod(*pod_id).ok());
  cstatus = cri_->ContainerStatus(*c2);
  ASSERT_TRUE(cstatus.ok());
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_EXITED) << "the pod's stop stops its containers";
  ASSERT_TRUE(cri_->RemovePod(*pod_id).ok());
  auto pods = cri_->ListPods();
  ASSERT_TRUE(pods.ok());
  EXPECT_TRUE(pods->empty());
}

TEST_F(CriE2eTest, PodSurvivesAContainerdRestart) {
  const v1::PodSandboxConfig pod = Pod("capsule-restart");
  auto pod_id = RunPod(pod);
  ASSERT_TRUE(pod_id.ok()) << pod_id.status().ToString();
  auto c1 = StartContainer(*pod_id, pod, "one", {"sleep", "3600"});
  ASSERT_TRUE(c1.ok()) << c1.status().ToString();

  cri_.reset();
  ASSERT_TRUE(ctrd_->Restart().ok());
  Connect();
  // CRI answers "server is not initialized yet" until it has recovered its
  // state (reloaded the shims); containerd offers no event for that.
  auto pstatus = cri_->PodStatus(*pod_id);
  for (int i = 0; i < 300 && !pstatus.ok() && pstatus.status().message().find("not initialized") != std::string::npos;
       ++i) {
    ::usleep(100 * 1000);
    pstatus = cri_->PodStatus(*pod_id);
  }
  ASSERT_TRUE(pstatus.ok()) << pstatus.status().ToString();
  EXPECT_EQ(pstatus->status().state(), v1::SANDBOX_READY) << "the shim was reconnected";
  auto exec = cri_->ExecSync(*c1, {"echo", "still-here"}, 30);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_EQ(exec->out, "still-here\n");

  ASSERT_TRUE(cri_->StopPod(*pod_id).ok());
  ASSERT_TRUE(cri_->RemovePod(*pod_id).ok());
}

}  // namespace
}  // namespace capsule::testing
