// `delete`'s question "does the pod's shim still serve?": a record naming
// the daemon is answered by that very process (the pid-reuse guard), not by
// the group's socket, which a child the killed daemon forked and had not
// exec'd yet can hold a moment longer. The whole clean-up of a shim killed
// mid-boot runs in ctr_e2e_test (AShimKilledMidBootLeavesNothingAndTheIdRunsAgain).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/host/daemon.h"
#include "shim/launcher/bundle.h"
#include "shim/launcher/bundle_record.h"
#include "shim/launcher/socket.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::launcher {
namespace {

class GroupStillServedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(TempDir dir, TempDir::Create("cleanup"));
    dir_.emplace(std::move(dir));
    // A bundle whose group socket takes connects: a listener nobody serves.
    const std::string socket = dir_->Join("group.sock");
    ASSERT_OK_AND_ASSIGN(listener_, ListenUnix(socket));
    ASSERT_OK(WriteFile(dir_->Join(kAddressFile), "unix://" + socket));
  }
  // Writes the bundle's record naming `shim` as its daemon.
  bool Served(const ProcessIdentity& shim) {
    BundleRecord r;
    r.sandbox_id = "pod1";
    r.shim_pid = shim.pid;
    r.shim_start_time = shim.start_time;
    r.shim_boot_id = shim.boot_id;
    EXPECT_OK(WriteBundleRecord(dir_->path(), r));
    return GroupStillServed(dir_->path());
  }
  std::optional<TempDir> dir_;
  UniqueFd listener_;
};

TEST_F(GroupStillServedTest, ADeadShimIsDeadWhateverItsSocketSays) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_OK_AND_ASSIGN(ProcessIdentity shim, IdentifyProcess(child));
  EXPECT_TRUE(Served(shim)) << "a live shim serves";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(CanConnect(dir_->path() + "/group.sock")) << "the socket still takes connects";
  EXPECT_FALSE(Served(shim)) << "the record's shim is dead";
}

TEST_F(GroupStillServedTest, AReusedPidIsNotTheShim) {
  ASSERT_OK_AND_ASSIGN(ProcessIdentity self, IdentifyProcess(::getpid()));
  ProcessIdentity older = self;
  older.start_time = self.start_time > 0 ? self.start_time - 1 : 1;
  EXPECT_FALSE(Served(older));
  EXPECT_TRUE(Served(self));
}

TEST_F(GroupStillServedTest, WithoutARecordOrOneNamingTheShimTheSocketIsAsked) {
  EXPECT_TRUE(GroupStillServed(dir_->path()));  // no record at all

  EXPECT_TRUE(Served(ProcessIdentity{0, 0, ""}));
  listener_.reset();
  EXPECT_FALSE(Served(ProcessIdentity{0, 0, ""}));
}

}  // namespace
}  // namespace capsule::shim::launcher
