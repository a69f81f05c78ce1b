// The dense device set's rootfs image cache: its key, and its trim (least
// recently used first, never an image in use or just built). The images
// themselves are built by mkfs.erofs in cri_dense_e2e_test.
#include "shim/task/image_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::task {
namespace {

mount::MountSpec Overlay(const std::string& lower, const std::string& upper) {
  return {"overlay", "overlay", "", {"index=off", "workdir=/w", "upperdir=" + upper, "lowerdir=" + lower}};
}

TEST(ImageCacheTest, TheKeyIsTheLayersWhileNothingWasWrittenOnThem) {
  auto dir = TempDir::Create("dense-key");
  ASSERT_OK(dir);
  const std::string upper = dir->Join("upper");
  ASSERT_OK(MkdirAll(upper));
  const std::string key = RootfsCacheKey({Overlay("/s/2/fs:/s/1/fs", upper)});
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(RootfsCacheKey({Overlay("/s/2/fs:/s/1/fs", upper)}), key) << "stable";
  EXPECT_NE(RootfsCacheKey({Overlay("/s/3/fs:/s/1/fs", upper)}), key) << "other layers, other image";
  ASSERT_OK(WriteFile(upper + "/written", "x"));
  EXPECT_EQ(RootfsCacheKey({Overlay("/s/2/fs:/s/1/fs", upper)}), "") << "a used upper layer is the container's own";
  EXPECT_EQ(RootfsCacheKey({{"bind", "/some/dir", "", {"rbind"}}}), "");
  EXPECT_EQ(RootfsCacheKey({}), "");
}

class ImageCacheTrimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(TempDir dir, TempDir::Create("image-cache"));
    dir_.emplace(std::move(dir));
  }
  // A cached image of `mib` MiB of real blocks, last used `age` seconds ago.
  std::string Image(const std::string& name, int mib, int age) {
    const std::string path = dir_->Join(name);
    EXPECT_OK(WriteFile(path, std::string(static_cast<size_t>(mib) << 20, 'x')));
    struct timespec times[2];
    times[0].tv_sec = times[1].tv_sec = ::time(nullptr) - age;
    times[0].tv_nsec = times[1].tv_nsec = 0;
    EXPECT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
    return path;
  }
  std::optional<TempDir> dir_;
};

TEST_F(ImageCacheTrimTest, TheLeastRecentlyUsedGoUntilTheRestFit) {
  const std::string oldest = Image("aaa.erofs", 2, 300);
  const std::string old = Image("bbb.erofs", 2, 200);
  const std::string recent = Image("ccc.erofs", 2, 100);
  const std::string fresh = Image("ddd.erofs", 2, 0);
  auto trimmed = TrimImageCache(dir_->path(), 5u << 20, fresh);
  ASSERT_EQ(trimmed.size(), 2u);
  EXPECT_EQ(trimmed[0].path, oldest);
  EXPECT_EQ(trimmed[1].path, old);
  EXPECT_GE(trimmed[0].bytes, 2u << 20);
  EXPECT_FALSE(PathExists(oldest));
  EXPECT_FALSE(PathExists(old));
  EXPECT_TRUE(PathExists(recent));
  EXPECT_TRUE(PathExists(fresh));
  EXPECT_TRUE(TrimImageCache(dir_->path(), 5u << 20, fresh).empty()) << "it fits now";
}

TEST_F(ImageCacheTrimTest, ImagesInUseJustBuiltOrNotTheCachesAreKept) {
  const std::string held = Image("aaa.erofs", 2, 300);
  const std::string own = Image("ctr-c1.erofs", 2, 300);      // a container's own, unlinked once plugged
  const std::string partial = Image("bbb.erofs.partial", 2, 300);  // a build in progress
  const std::string other = Image("notes.txt", 2, 300);
  const std::string keep = Image("ccc.erofs", 2, 250);
  ASSERT_EQ(::symlink(held.c_str(), dir_->Join("link.erofs").c_str()), 0);
  // Another container holds aaa's key lock (it is being plugged).
  UniqueFd lock(::open(dir_->Join("aaa.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_TRUE(lock);
  ASSERT_EQ(::flock(lock.get(), LOCK_EX), 0);
  EXPECT_TRUE(TrimImageCache(dir_->path(), 0, keep).empty());
  for (const auto& p : {held, own, partial, other, keep}) EXPECT_TRUE(PathExists(p)) << p;
  // Released: it goes, and its lock file with it.
  lock.reset();
  auto trimmed = TrimImageCache(dir_->path(), 0, keep);
  ASSERT_EQ(trimmed.size(), 1u);
  EXPECT_EQ(trimmed[0].path, held);
  EXPECT_FALSE(PathExists(dir_->Join("aaa.lock")));
  EXPECT_TRUE(PathExists(keep));
}

}  // namespace
}  // namespace capsule::shim::task
