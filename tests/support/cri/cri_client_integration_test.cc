// The CRI test client against a real containerd 1.6 with runc: version,
// images, a pod with a container, ExecSync, status, stats, and tear-down,
// with container logs written to the pod's log directory. This also proves
// the local pause image serves as CRI's sandbox image.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/common/file_util.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/images/test_images.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing::cri {
namespace {

using std::chrono::milliseconds;

class CriClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ContainerdOptions o;
    o.cri.emplace();  // runc only, no CNI: the pods here use the host network
    auto c = ContainerdHarness::Start(o);
    ASSERT_OK(c);
    ctrd_ = std::move(*c);
    for (const char* image : {"busybox", "pause"}) {
      Status imported = ctrd_->ImportImage(TestImageTar(image));
      ASSERT_OK(imported);
    }
    auto client = CriClient::Connect(ctrd_->grpc_address(), milliseconds(10000));
    ASSERT_OK(client);
    cri_ = std::move(*client);
  }
  void TearDown() override {
    cri_.reset();
    if (ctrd_) {
      auto leaks = ctrd_->Leaks();
      EXPECT_TRUE(leaks.empty()) << leaks.front();
    }
  }
  std::unique_ptr<ContainerdHarness> ctrd_;
  std::unique_ptr<CriClient> cri_;
};

TEST_F(CriClientTest, VersionAndImages) {
  auto v = cri_->Version();
  ASSERT_OK(v);
  EXPECT_EQ(v->runtime_name(), "containerd");
  EXPECT_EQ(v->runtime_api_version(), "v1");
  auto images = cri_->ListImages();
  ASSERT_OK(images);
  std::vector<std::string> tags;
  for (const auto& img : *images)
    for (const auto& t : img.repo_tags()) tags.push_back(t);
  EXPECT_NE(std::find(tags.begin(), tags.end(), kBusyboxImage), tags.end());
  EXPECT_NE(std::find(tags.begin(), tags.end(), kPauseImage), tags.end());
  auto busybox = cri_->ImageStatus(kBusyboxImage);
  ASSERT_OK(busybox);
  EXPECT_GT(busybox->size(), 0u);
  auto missing = cri_->ImageStatus("capsule.test/nope:latest");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("capsule.test/nope:latest"), std::string::npos);
}

TEST_F(CriClientTest, PodLifecycleWithExecAndLogsUnderRunc) {
  const std::string logs = ctrd_->dir() + "/pod-logs";
  ASSERT_OK(MkdirAll(logs));
  PodOptions pod;
  pod.name = "cri-runc";
  pod.log_directory = logs;
  pod.labels = {{"test", "cri-client"}};
  pod.pid = v1::CONTAINER;
  const v1::PodSandboxConfig pod_config = MakePodConfig(pod);
  auto pod_id = cri_->RunPod(pod_config, "");
  ASSERT_OK(pod_id);

  auto status = cri_->PodStatus(*pod_id);
  ASSERT_OK(status);
  EXPECT_EQ(status->status().state(), v1::SANDBOX_READY);
  EXPECT_EQ(status->status().metadata().name(), "cri-runc");
  EXPECT_EQ(status->status().linux().namespaces().options().pid(), v1::CONTAINER);
  auto pods = cri_->ListPods();
  ASSERT_OK(pods);
  ASSERT_EQ(pods->size(), 1u);
  EXPECT_EQ(pods->front().labels().at("test"), "cri-client");

  ContainerOptions c;
  c.name = "sleeper";
  c.image = kBusyboxImage;
  c.command = {"sh", "-c", "echo started; exec sleep 3600"};
  c.log_path = "sleeper.log";
  auto cid = cri_->CreateContainer(*pod_id, pod_config, c);
  ASSERT_OK(cid);
  ASSERT_OK(cri_->StartContainer(*cid));
  auto cstatus = cri_->ContainerStatus(*cid);
  ASSERT_OK(cstatus);
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_RUNNING);

  auto exec = cri_->ExecSync(*cid, {"echo", "hello"}, 10);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->exit_code, 0);
  EXPECT_EQ(exec->out, "hello\n");
  exec = cri_->ExecSync(*cid, {"sh", "-c", "echo oops >&2; exit 3"}, 10);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->exit_code, 3);
  EXPECT_EQ(exec->err, "oops\n");
  EXPECT_EQ(exec->out, "");

  auto stats = cri_->ContainerStats(*cid);
  ASSERT_OK(stats);
  EXPECT_EQ(stats->attributes().id(), *cid);
  auto all_stats = cri_->ListContainerStats(*pod_id);
  ASSERT_OK(all_stats);
  EXPECT_EQ(all_stats->size(), 1u);
  auto list = cri_->ListContainers(*pod_id);
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 1u);

  ASSERT_OK(cri_->StopContainer(*cid, 2));
  cstatus = cri_->ContainerStatus(*cid);
  ASSERT_OK(cstatus);
  EXPECT_EQ(cstatus->status().state(), v1::CONTAINER_EXITED);
  // CRI's log format: "<time> stdout F started".
  auto log = ReadFile(logs + "/sleeper.log");
  ASSERT_OK(log);
  EXPECT_NE(log->find(" stdout F started"), std::string::npos) << *log;

  ASSERT_OK(cri_->RemoveContainer(*cid));
  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
  pods = cri_->ListPods();
  ASSERT_OK(pods);
  EXPECT_TRUE(pods->empty());
}

TEST_F(CriClientTest, ErrorsNameTheCallAndObject) {
  auto st = cri_->ContainerStatus("no-such-container");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), Code::kNotFound);
  EXPECT_NE(st.status().message().find("CRI ContainerStatus no-such-container"), std::string::npos)
      << st.status().message();
  PodOptions pod;
  pod.runtime_handler = "no-such-handler";
  auto id = cri_->RunPod(pod);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.status().message().find("no-such-handler"), std::string::npos) << id.status().message();
}

// The harness's CNI set-up under runc: a POD-network pod gets an address on
// the harness's own bridge, and until it is removed the harness counts its
// netns and its bridge port as leaks (so a test that forgets a pod fails).
TEST(CriOnHarnessCniTest, RuncPodGetsAnAddressOnTheHarnessBridgeAndIsALeakUntilRemoved) {
  ContainerdOptions o;
  o.cri.emplace();
  o.cri->cni = true;
  auto h = ContainerdHarness::Start(o);
  ASSERT_OK(h);
  ContainerdHarness& ctrd = **h;
  Status imported = ctrd.ImportImage(TestImageTar("pause"));
  ASSERT_OK(imported);
  auto cri = CriClient::Connect(ctrd.grpc_address(), milliseconds(10000));
  ASSERT_OK(cri);
  PodOptions pod;
  pod.name = "cni-runc";
  pod.network = v1::POD;
  auto id = (*cri)->RunPod(MakePodConfig(pod), "");
  ASSERT_OK(id) << "\n" << ctrd.LogTail();
  auto status = (*cri)->PodStatus(*id);
  ASSERT_OK(status);
  const std::string& gateway = ctrd.cni()->gateway;
  EXPECT_EQ(status->status().network().ip().rfind(gateway.substr(0, gateway.rfind('.') + 1), 0), 0u)
      << status->status().network().ip() << " not in " << ctrd.cni()->subnet;

  const std::vector<std::string> live = ctrd.Leaks();
  auto has = [&](const std::string& prefix) {
    return std::any_of(live.begin(), live.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has("netns /var/run/netns/cni-")) << ::testing::PrintToString(live);
  EXPECT_TRUE(has("port veth")) << ::testing::PrintToString(live);

  ASSERT_TRUE((*cri)->StopPod(*id).ok());
  ASSERT_TRUE((*cri)->RemovePod(*id).ok());
  const std::vector<std::string> after = ctrd.Leaks();
  EXPECT_TRUE(after.empty()) << ::testing::PrintToString(after);
}

}  // namespace
}  // namespace capsule::testing::cri
