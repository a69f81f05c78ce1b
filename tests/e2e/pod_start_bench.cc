// Pod start latency through CRI on one containerd 1.6: RunPodSandbox +
// CreateContainer + StartContainer of a busybox container in a pod on a
// CNI bridge network, Capsule (a cold microVM boot per pod, TCG on hosts
// without usable KVM, plus the NIC hot-plug) against runc, runs interleaved
// so both see the same load. Prints each run, the medians and their ratio;
// asserts only that every run worked. `make bench` runs it (label bench).
// CAPSULE_BENCH_RUNS sets the number of runs of each (default 10).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "tests/e2e/e2e_env.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/images/test_images.h"

namespace capsule::testing {
namespace {

using std::chrono::milliseconds;
namespace v1 = ::runtime::v1;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

class PodStartBench : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CAPSULE_SHIM_HAS_VM) GTEST_SKIP() << "the shim was built without runtime/vm";
    auto env = E2eEnv::Create();
    ASSERT_TRUE(env.ok()) << env.status().ToString();
    env_.emplace(std::move(*env));
    ContainerdOptions o;
    o.path_prepend = {E2eEnv::ShimDir()};
    o.cri.emplace();
    o.cri->cni = true;
    o.cri->runtimes = {{"capsule", kCapsuleRuntimeType, {{"ConfigPath", env_->config_path()}}}};
    auto c = ContainerdHarness::Start(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ctrd_ = std::move(*c);
    for (const char* image : {"busybox", "pause"}) {
      Status imported = ctrd_->ImportImage(TestImageTar(image));
      ASSERT_TRUE(imported.ok()) << imported.ToString();
    }
    auto client = cri::CriClient::Connect(ctrd_->grpc_address(), milliseconds(20000));
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    cri_ = std::move(*client);
    cri_->set_call_timeout(milliseconds(180000));
  }
  void TearDown() override {
    cri_.reset();
    if (!ctrd_) return;
    auto leaks = env_->Leaks(ctrd_->grpc_address(), {ctrd_->dir()});
    for (auto& l : ctrd_->Leaks()) leaks.push_back(std::move(l));
    EXPECT_TRUE(leaks.empty()) << leaks.front();
    if (!leaks.empty()) env_->Reap(ctrd_->grpc_address(), {ctrd_->dir()});
  }

  // One pod start (timed) and its tear-down (not timed); ms.
  double StartOnePod(const std::string& handler, int n) {
    cri::PodOptions pod;
    pod.name = "bench-" + (handler.empty() ? std::string("runc") : handler) + "-" + std::to_string(n);
    pod.runtime_handler = handler;
    pod.network = v1::POD;
    const v1::PodSandboxConfig config = cri::MakePodConfig(pod);
    cri::ContainerOptions c;
    c.name = "sleeper";
    c.image = kBusyboxImage;
    c.command = {"sleep", "3600"};
    const auto t0 = std::chrono::steady_clock::now();
    auto pod_id = cri_->RunPod(config, handler);
    EXPECT_TRUE(pod_id.ok()) << pod_id.status().ToString();
    if (!pod_id.ok()) return 0;
    auto cid = cri_->CreateContainer(*pod_id, config, c);
    EXPECT_TRUE(cid.ok()) << cid.status().ToString();
    Status started = cid.ok() ? cri_->StartContainer(*cid) : cid.status();
    EXPECT_TRUE(started.ok()) << started.ToString();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(cri_->StopPod(*pod_id).ok());
    EXPECT_TRUE(cri_->RemovePod(*pod_id).ok());
    return ms;
  }

  std::optional<E2eEnv> env_;
  std::unique_ptr<ContainerdHarness> ctrd_;
  std::unique_ptr<cri::CriClient> cri_;
};

TEST_F(PodStartBench, CapsuleAgainstRunc) {
  const char* runs_env = std::getenv("CAPSULE_BENCH_RUNS");
  const int runs = runs_env != nullptr ? std::max(1, std::atoi(runs_env)) : 10;
  std::vector<double> capsule, runc;
  for (int i = 0; i < runs; ++i) {
    runc.push_back(StartOnePod("", i));
    capsule.push_back(StartOnePod("capsule", i));
  }
  for (double ms : runc) std::cout << "runc    pod start (RunPodSandbox+Create+Start): " << ms << " ms\n";
  for (double ms : capsule) std::cout << "capsule pod start (RunPodSandbox+Create+Start): " << ms << " ms\n";
  std::cout << "median runc " << Median(runc) << " ms over " << runc.size() << " runs; median capsule "
            << Median(capsule) << " ms over " << capsule.size() << " runs; capsule/runc = "
            << (Median(runc) > 0 ? Median(capsule) / Median(runc) : 0) << "\n";
}

}  // namespace
}  // namespace capsule::testing
