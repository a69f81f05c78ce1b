// LinuxMounter and the mount-table helpers against the real kernel: the
// overlay a snapshotter hands the shim, read-only binds, the clear error for
// option strings mount(2) cannot take, UnmountTree leaving nothing, and a
// busy mount waited for, then detached.
// (The unit tests use FakeMounter; this covers the real one.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/mount_table.h"
#include "runtime/common/unique_fd.h"
#include "shim/mount/mounter.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using shim::mount::LinuxMounter;
using shim::mount::MountSpec;
using capsule::MountsUnder;
using shim::mount::ScopedMount;

class MounterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = TempDir::Create("shimmount");
    ASSERT_OK(t);
    tmp_.emplace(std::move(*t));
    for (const char* d : {"lower1", "lower2", "upper", "work", "target", "src"})
      ASSERT_OK(MkdirAll(tmp_->Join(d), 0755));
    ASSERT_OK(WriteFileAtomic(tmp_->Join("lower1/a"), "from lower1"));
    ASSERT_OK(WriteFileAtomic(tmp_->Join("lower2/b"), "from lower2"));
    ASSERT_OK(WriteFileAtomic(tmp_->Join("src/f"), "bound"));
  }
  void TearDown() override {
    auto left = MountsUnder(tmp_->path(), true);
    ASSERT_OK(left);
    EXPECT_TRUE(left->empty()) << "left mounted: " << left->front();
    (void)capsule::UnmountTree(tmp_->path());
  }
  std::optional<TempDir> tmp_;
  LinuxMounter mounter_;
};

TEST_F(MounterTest, OverlayFromContainerdsMountIsWritableAndGoesAway) {
  MountSpec m{"overlay", "overlay", tmp_->Join("target"),
              {"index=off", "workdir=" + tmp_->Join("work"), "upperdir=" + tmp_->Join("upper"),
               "lowerdir=" + tmp_->Join("lower1") + ":" + tmp_->Join("lower2")}};
  {
    auto sm = ScopedMount::Make(&mounter_, m);
    ASSERT_OK(sm);
    EXPECT_EQ(*ReadFile(tmp_->Join("target/a")), "from lower1");
    EXPECT_EQ(*ReadFile(tmp_->Join("target/b")), "from lower2");
    ASSERT_OK(WriteFileAtomic(tmp_->Join("target/new"), "x"));
    EXPECT_TRUE(PathExists(tmp_->Join("upper/new"))) << "writes land in the upper dir";
    EXPECT_EQ(MountsUnder(tmp_->path())->size(), 1u);
  }
  EXPECT_TRUE(MountsUnder(tmp_->path())->empty()) << "ScopedMount unmounts on destruction";
  EXPECT_FALSE(PathExists(tmp_->Join("target/a")));
}

TEST_F(MounterTest, ReadOnlyBindRefusesWrites) {
  MountSpec m{"bind", tmp_->Join("src"), tmp_->Join("target"), {"rbind", "ro"}};
  auto sm = ScopedMount::Make(&mounter_, m);
  ASSERT_OK(sm);
  EXPECT_EQ(*ReadFile(tmp_->Join("target/f")), "bound");
  EXPECT_EQ(::mkdir(tmp_->Join("target/d").c_str(), 0755), -1);
  EXPECT_EQ(errno, EROFS);
  ASSERT_OK(sm->Unmount());
  EXPECT_OK(sm->Unmount()) << "idempotent";
}

TEST_F(MounterTest, OptionsLongerThanAPageAreRefusedByName) {
  MountSpec m{"overlay", "overlay", tmp_->Join("target"), {"lowerdir=" + std::string(5000, 'x')}};
  Status st = mounter_.Mount(m);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(tmp_->Join("target")), std::string::npos) << st.message();
}

TEST_F(MounterTest, FailedMountNamesTheTargetAndLeavesNothing) {
  MountSpec m{"overlay", "overlay", tmp_->Join("target"), {"lowerdir=" + tmp_->Join("missing")}};
  Status st = mounter_.Mount(m);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("target"), std::string::npos) << st.message();
}

TEST_F(MounterTest, UnmountTreeDetachesNestedMountsDeepestFirst) {
  ASSERT_OK(mounter_.Mount({"bind", tmp_->Join("lower1"), tmp_->Join("target"), {"rbind"}}));
  ASSERT_OK(MkdirAll(tmp_->Join("target/nested"), 0755));
  ASSERT_OK(mounter_.Mount({"bind", tmp_->Join("src"), tmp_->Join("target/nested"), {"rbind"}}));
  auto under = MountsUnder(tmp_->path());
  ASSERT_OK(under);
  ASSERT_EQ(under->size(), 2u);
  EXPECT_EQ(under->front(), tmp_->Join("target/nested")) << "deepest first";
  ASSERT_OK(capsule::UnmountTree(tmp_->path()));
  EXPECT_TRUE(MountsUnder(tmp_->path())->empty());
  ASSERT_OK(RemoveAll(tmp_->Join("lower1/nested")));
}

TEST_F(MounterTest, ABusyMountIsUnmountedOnceReleasedAndDetachedIfNeverReleased) {
  const std::string target = tmp_->Join("target");
  ASSERT_OK(mounter_.Mount({"bind", tmp_->Join("src"), target, {"rbind"}}));
  // A file open on the mount keeps umount2 answering EBUSY until it closes.
  UniqueFd held(::open((target + "/f").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(held.valid());
  std::atomic<bool> released{false};
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    released = true;  // before the close, so a wait that ends on it sees it
    held.reset();
  });
  Status unmounted = mounter_.Unmount(target);
  const bool waited = released;
  release.join();
  ASSERT_OK(unmounted);
  EXPECT_TRUE(waited) << "Unmount returned before the mount was released: it did not wait";
  EXPECT_TRUE(MountsUnder(tmp_->path())->empty());

  // Never released: after its wait, Unmount detaches it lazily. It leaves
  // the mount table at once, and the open file still reads through it.
  ASSERT_OK(mounter_.Mount({"bind", tmp_->Join("src"), target, {"rbind"}}));
  UniqueFd kept(::open((target + "/f").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(kept.valid());
  ASSERT_OK(mounter_.Unmount(target));
  EXPECT_TRUE(MountsUnder(tmp_->path())->empty());
  char buf[8] = {};
  EXPECT_EQ(::pread(kept.get(), buf, sizeof buf, 0), 5);
  EXPECT_EQ(std::string(buf, 5), "bound");
}

}  // namespace
}  // namespace capsule::testing
