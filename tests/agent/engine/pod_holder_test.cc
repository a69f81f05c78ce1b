// The pod holder on a real kernel: made ahead, adopted by a sandbox
// container, confined, PID 1 of the pod's pid namespace, and gone with the
// engine when never adopted.
#include "agent/engine/pod_holder.h"

#include <signal.h>

#include "runtime/common/file_util.h"
#include "runtime/host/process_uids.h"
#include "tests/agent/engine/engine_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine::testing {
namespace {

std::string ProcStatusLine(pid_t pid, const std::string& key) {
  auto status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  return status.ok() ? StatusField(*status, key) : "";
}

TEST_F(EngineTest, TheAdoptedPodHolderIsConfinedAndIsPid1OfThePod) {
  ASSERT_OK(sandbox_->PreparePodHolder());
  auto holder = sandbox_->AdoptPodHolder("pod");
  ASSERT_OK(holder);
  EXPECT_EQ((*holder)->id(), "pod");
  EXPECT_EQ((*holder)->state(), ContainerState::kRunning);
  const pid_t pid = (*holder)->init_pid();
  ASSERT_GT(pid, 0);
  auto same = sandbox_->Get("pod");
  ASSERT_OK(same);
  EXPECT_EQ(same->get(), holder->get());

  // Confined before it was ready: an empty root, uid 65535, no
  // capabilities, no new privileges, named pause.
  EXPECT_EQ(*ReadFile("/proc/" + std::to_string(pid) + "/comm"), "pause\n");
  EXPECT_EQ(ProcStatusLine(pid, "Uid"), "65535\t65535\t65535\t65535");
  EXPECT_EQ(ProcStatusLine(pid, "CapEff"), "0000000000000000");
  EXPECT_EQ(ProcStatusLine(pid, "NoNewPrivs"), "1");
  EXPECT_TRUE(ListDir("/proc/" + std::to_string(pid) + "/root").empty());

  // Nothing to exec in, no root filesystem to lend.
  EXPECT_EQ((*holder)->Exec("e1", oci::Process{}).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ((*holder)->RootfsPath().status().code(), Code::kFailedPrecondition);

  // The pod's hostname goes into the holder's uts namespace only.
  auto uts = (*holder)->ShareNamespaces({oci::NamespaceType::kUts});
  ASSERT_OK(uts);
  ASSERT_OK(SetHostnameIn(uts->at(oci::NamespaceType::kUts).get(), "held-pod"));

  // A container of a shareProcessNamespace pod sees the holder as PID 1.
  ContainerPtr app = StartInPodOf("pod", "app", {"sh", "-c", "cat /proc/1/comm; hostname"});
  ASSERT_TRUE(app);
  EXPECT_EQ(Drain(*app->Io("")).first, "pause\nheld-pod\n");
  EXPECT_EQ(app->Wait("")->status, 0);

  // SIGTERM ends it with status 0, as it ends pause.
  ASSERT_TRUE((*holder)->Signal("", SIGTERM, false).ok());
  auto exit = (*holder)->Wait("");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 0);
}

TEST_F(EngineTest, AdoptionWithoutAReadyHolderMakesOneAndAnIdInUseIsRefused) {
  auto holder = sandbox_->AdoptPodHolder("pod");
  ASSERT_OK(holder);
  EXPECT_EQ((*holder)->state(), ContainerState::kRunning);
  EXPECT_EQ(sandbox_->AdoptPodHolder("pod").status().code(), Code::kAlreadyExists);
  EXPECT_EQ(sandbox_->AdoptPodHolder("../x").status().code(), Code::kInvalidArgument);
}

// TearDown's checks (no cgroup, mount or fd left) cover the holder too.
TEST_F(EngineTest, AHolderNeverAdoptedGoesWithTheEngine) {
  ASSERT_OK(sandbox_->PreparePodHolder());
  ASSERT_OK(sandbox_->PreparePodHolder());  // a no-op while it is ready
  EXPECT_TRUE(PathExists(cgroup_root_ + "/" + cgroup_parent_ + "/" + kPodHolderId));
}

}  // namespace
}  // namespace capsule::engine::testing
