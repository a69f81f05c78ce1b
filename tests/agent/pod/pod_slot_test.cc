// PodSlot and GuestPod over a fake engine: the engine made ahead and used
// by the pod, one pod at a time, a failed create leaving nothing, the
// teardown, the holder's adoption and the containers' bookkeeping. Real
// mounts and the real engine run in agent_service_test.cc and container_api_test.
#include <gtest/gtest.h>

#include "agent/pod/pod_slot.h"
#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "tests/agent/support/fake_engine.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::pod {
namespace {

class PodSlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(TempDir dir, TempDir::Create("pod-slot"));
    dir_.emplace(std::move(dir));
    PodEnvironment env;
    env.resolv_conf_path = dir_->Join("etc/resolv.conf");
    env.apply_hostname = false;
    auto fakes = fakes::FakeEngines(&log_);
    slot_.emplace(env, [this, fakes]() -> Result<engine::ContainerManagerPtr> {
      if (refuse_engine_) return Internal("no engine today");
      return fakes();
    });
  }

  static PodSpec Spec(const std::string& id) {
    PodSpec spec;
    spec.id = id;
    return spec;
  }

  std::optional<TempDir> dir_;
  fakes::FakeEngineLog log_;
  bool refuse_engine_ = false;
  std::optional<PodSlot> slot_;
};

TEST_F(PodSlotTest, ThePodTakesTheEngineMadeAheadAndOnlyOnePodExists) {
  ASSERT_OK(slot_->Prepare());
  EXPECT_EQ(log_.engines, 1);
  EXPECT_EQ(log_.holders_prepared, 1);
  ASSERT_OK(slot_->Prepare());  // already prepared: nothing more
  EXPECT_EQ(log_.engines, 1);
  ASSERT_OK_AND_ASSIGN(GuestPodPtr pod, slot_->Create(Spec("pod-1")));
  EXPECT_EQ(log_.engines, 1);
  EXPECT_EQ(pod->id(), "pod-1");
  ASSERT_OK_AND_ASSIGN(GuestPodPtr current, slot_->Current());
  EXPECT_EQ(current, pod);
  EXPECT_EQ(slot_->Create(Spec("pod-2")).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(log_.engines, 1);
}

TEST_F(PodSlotTest, DestroyEmptiesTheEngineIsIdempotentAndTheNextPodGetsAFreshEngine) {
  ASSERT_OK_AND_ASSIGN(GuestPodPtr pod, slot_->Create(Spec("pod-1")));
  EXPECT_EQ(log_.engines, 1);
  ASSERT_OK(slot_->Destroy());
  EXPECT_EQ(log_.remove_all, 1);
  EXPECT_REASON(slot_->Current(), reason::kNoSandbox);
  // A call that still holds the pod keeps a valid object.
  EXPECT_EQ(pod->id(), "pod-1");
  ASSERT_OK(slot_->Destroy());
  EXPECT_EQ(log_.remove_all, 1);
  ASSERT_OK(slot_->Create(Spec("pod-2")));
  EXPECT_EQ(log_.engines, 2);
}

TEST_F(PodSlotTest, BadSpecsAreRefusedBeforeAnythingIsMadeOrWritten) {
  PodSpec spec = Spec("pod-1");
  spec.dns = {"nameserver 10.0.0.1", "rm -rf /"};
  Status st = slot_->Create(spec).status();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("dns[1]"), std::string::npos) << st.message();
  EXPECT_EQ(log_.engines, 0);
  EXPECT_FALSE(PathExists(dir_->Join("etc/resolv.conf")));
  EXPECT_EQ(slot_->Create(Spec("../x")).status().code(), Code::kInvalidArgument);
  EXPECT_REASON(slot_->Current(), reason::kNoSandbox);
}

TEST_F(PodSlotTest, DnsBecomesResolvConf) {
  PodSpec spec = Spec("pod-1");
  spec.dns = {"10.96.0.10", "search default.svc.cluster.local"};
  ASSERT_OK(slot_->Create(spec));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFile(dir_->Join("etc/resolv.conf")));
  EXPECT_EQ(text, "nameserver 10.96.0.10\nsearch default.svc.cluster.local\n");
}

TEST_F(PodSlotTest, APodWhoseEngineCannotBeMadeIsNotCreated) {
  refuse_engine_ = true;
  Status st = slot_->Create(Spec("pod-1")).status();
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find("container engine"), std::string::npos) << st.message();
  EXPECT_REASON(slot_->Current(), reason::kNoSandbox);
  refuse_engine_ = false;
  ASSERT_OK(slot_->Create(Spec("pod-1")));
}

TEST_F(PodSlotTest, KernelModulesNeedALoader) {
  PodSpec spec = Spec("pod-1");
  spec.kernel_modules = {"9p"};
  Status st = slot_->Create(spec).status();
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("kernel_modules"), std::string::npos) << st.message();
  EXPECT_EQ(log_.engines, 0);
}

TEST_F(PodSlotTest, RehearsalUsesTheIdleEngineWhichThePodThenTakes) {
  ASSERT_OK_AND_ASSIGN(double ms, slot_->Rehearse({}));
  EXPECT_EQ(ms, 1.5);
  EXPECT_EQ(log_.rehearsals, 1);
  EXPECT_EQ(log_.engines, 1);
  ASSERT_OK(slot_->Create(Spec("pod-1")));
  EXPECT_EQ(log_.engines, 1);
  EXPECT_EQ(slot_->Rehearse({}).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(log_.rehearsals, 1);
}

// What MountAhead checks before it mounts anything (the mounts themselves
// run in a real guest: sandbox_vm_test's AStorageMountedAheadIsTakenOverByTheSandbox).
TEST_F(PodSlotTest, StoragesAreMountedAheadOfAPodOnlyAndCheckedFirst) {
  Status bad = slot_->MountAhead({storage::StorageSpec{"tmpfs", "x", "", {}, "relative"}});
  EXPECT_EQ(bad.code(), Code::kInvalidArgument) << bad.ToString();
  EXPECT_NE(bad.message().find("storages[0]"), std::string::npos) << bad.ToString();
  ASSERT_OK(slot_->MountAhead({}));
  ASSERT_OK(slot_->Create(Spec("pod-1")));
  Status late = slot_->MountAhead({storage::StorageSpec{"tmpfs", "x", "", {}, dir_->Join("m")}});
  EXPECT_EQ(late.code(), Code::kFailedPrecondition) << late.ToString();
  EXPECT_NE(late.message().find("pod-1"), std::string::npos) << late.ToString();
  EXPECT_FALSE(PathExists(dir_->Join("m"))) << "a refused storage made its mount point";
}

TEST_F(PodSlotTest, TheAdoptedHolderAnchorsThePod) {
  PodSpec spec = Spec("pod-1");
  spec.sandbox_pidns = true;
  ASSERT_OK_AND_ASSIGN(GuestPodPtr pod, slot_->Create(spec));
  ASSERT_OK_AND_ASSIGN(pid_t pid, pod->AdoptHolder("pause"));
  EXPECT_EQ(pid, 42);
  EXPECT_EQ(log_.adopted, std::vector<std::string>{"pause"});
  EXPECT_EQ(pod->namespaces().anchor(), "pause");
  // The pod has its sandbox container now: a second is refused.
  EXPECT_EQ(pod->AdoptHolder("pause2").status().code(), Code::kFailedPrecondition);
}

TEST_F(PodSlotTest, AHolderWhoseHostnameCannotBeSetIsRemovedAgain) {
  PodSpec spec = Spec("pod-1");
  spec.hostname = "web-0";
  ASSERT_OK_AND_ASSIGN(GuestPodPtr pod, slot_->Create(spec));
  // The fake holder shares no uts namespace, so the hostname cannot be set.
  Status st = pod->AdoptHolder("pause").status();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("hostname of the pod holder"), std::string::npos) << st.message();
  EXPECT_EQ(pod->engine().Get("pause").status().code(), Code::kNotFound);
  EXPECT_FALSE(pod->namespaces().anchor().has_value());
}

TEST_F(PodSlotTest, ContainersAreRememberedByCriNameUntilForgotten) {
  ASSERT_OK_AND_ASSIGN(GuestPodPtr pod, slot_->Create(Spec("pod-1")));
  pod->AddContainer("c1", {}, "web");
  pod->AddContainer("c2", {}, "");
  EXPECT_EQ(pod->CriNames(), (std::map<std::string, std::string>{{"c1", "web"}}));
  ASSERT_OK(pod->ForgetContainer("c1"));
  EXPECT_TRUE(pod->CriNames().empty());
  ASSERT_OK(pod->ForgetContainer("c1"));  // nothing left to forget
}

}  // namespace
}  // namespace capsule::agent::pod
