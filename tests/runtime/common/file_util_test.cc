#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>
#include <sys/stat.h>

namespace capsule {
namespace {

TEST(FileUtilTest, AtomicWriteThenRead) {
  auto dir = TempDir::Create("fileutil");
  ASSERT_OK(dir);
  std::string p = dir->Join("a/b/c");
  ASSERT_OK(MkdirAll(p));
  ASSERT_OK(WriteFileAtomic(p + "/f", "hello", 0600));
  EXPECT_EQ(*ReadFile(p + "/f"), "hello");
  struct stat st{};
  ASSERT_EQ(stat((p + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(FileUtilTest, ReadMissingFileNamesPath) {
  auto r = ReadFile("/nonexistent/capsule-file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/capsule-file"), std::string::npos);
}

TEST(FileUtilTest, TempDirRemovedWithContents) {
  std::string path;
  {
    auto dir = TempDir::Create("fileutil");
    ASSERT_OK(dir);
    path = dir->path();
    ASSERT_OK(MkdirAll(dir->Join("x/y")));
    ASSERT_OK(WriteFile(dir->Join("x/y/z"), "1"));
  }
  EXPECT_FALSE(PathExists(path));
}

TEST(FileUtilTest, MkdirAllOverFileFails) {
  auto dir = TempDir::Create("fileutil");
  ASSERT_OK(dir);
  ASSERT_OK(WriteFile(dir->Join("f"), ""));
  EXPECT_FALSE(MkdirAll(dir->Join("f")).ok());
}

}  // namespace
TEST(FileUtilTest, RemoveAllStopsAtSameFilesystemBindMounts) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to bind-mount";
  auto dir = TempDir::Create("rmbind");
  ASSERT_OK(dir);
  ASSERT_OK(MkdirAll(dir->Join("tree/mnt")));
  ASSERT_OK(MkdirAll(dir->Join("precious")));
  ASSERT_OK(WriteFile(dir->Join("precious/file"), "keep me"));
  ASSERT_EQ(::mount(dir->Join("precious").c_str(), dir->Join("tree/mnt").c_str(), nullptr, MS_BIND, nullptr), 0);
  Status st = RemoveAll(dir->Join("tree"));
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(::umount(dir->Join("tree/mnt").c_str()), 0);
  EXPECT_EQ(*ReadFile(dir->Join("precious/file")), "keep me");
}

}  // namespace capsule
