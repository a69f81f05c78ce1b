// An erofs image of a tree holds what a container's rootfs needs: read it
// back with erofs-utils' own extractor (fsck.erofs --extract, which also
// checks the image) and compare. The guest mounting such an image from a
// SCSI disk is covered by the VM tests.
#include "runtime/erofs/erofs_image.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>

#include "runtime/common/file_util.h"
#include "runtime/host/run_capture.h"
#include "tests/support/status_matchers.h"

namespace capsule::erofs {
namespace {

struct stat Lstat(const std::string& p) {
  struct stat st{};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st;
}

TEST(ErofsImageTest, KeepsContentOwnersModesLinksAndFileCapabilities) {
  auto dir = TempDir::Create("erofs");
  ASSERT_OK(dir);
  const std::string src = dir->Join("src");
  ASSERT_OK(MkdirAll(src + "/etc/deep/er"));
  ASSERT_OK(WriteFile(src + "/etc/hostname", "busybox\n"));
  ASSERT_OK(WriteFile(src + "/etc/shadow", "root:*:1::::::\n"));
  ASSERT_EQ(::chmod((src + "/etc/shadow").c_str(), 0640), 0);
  ASSERT_EQ(::chown((src + "/etc/shadow").c_str(), 0, 42), 0);
  ASSERT_OK(WriteFile(src + "/etc/deep/er/big", std::string(300000, 'x')));
  ASSERT_EQ(::chown((src + "/etc/deep/er/big").c_str(), 1234, 5678), 0);
  ASSERT_EQ(::symlink("../etc/hostname", (src + "/etc/deep/link").c_str()), 0);
  ASSERT_OK(WriteFile(src + "/ping", "#!/bin/true\n"));
  ASSERT_EQ(::chmod((src + "/ping").c_str(), 0755), 0);
  // cap_net_raw+ep, as a ping binary carries it (vfs_cap_data revision 2).
  const unsigned char cap[20] = {0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00};
  ASSERT_EQ(::setxattr((src + "/ping").c_str(), "security.capability", cap, sizeof cap, 0), 0) << std::strerror(errno);

  const std::string image = dir->Join("rootfs.erofs");
  Status made = MakeErofsImage(src, image);
  ASSERT_OK(made);
  EXPECT_FALSE(PathExists(image + ".partial"));
  EXPECT_EQ(Lstat(image).st_mode & 07777, 0644u);

  const std::string out = dir->Join("out");
  auto extracted = RunAndCapture({"/usr/bin/fsck.erofs", "--extract=" + out, "--preserve", image},
                                 std::chrono::seconds(60));
  ASSERT_OK(extracted);
  ASSERT_EQ(extracted->exit_code, 0) << extracted->output;
  EXPECT_EQ(ReadFile(out + "/etc/hostname").value_or(""), "busybox\n");
  EXPECT_EQ(ReadFile(out + "/etc/deep/er/big").value_or("").size(), 300000u);
  struct stat shadow = Lstat(out + "/etc/shadow");
  EXPECT_EQ(shadow.st_mode & 07777, 0640u);
  EXPECT_EQ(shadow.st_gid, 42u);
  struct stat big = Lstat(out + "/etc/deep/er/big");
  EXPECT_EQ(big.st_uid, 1234u);
  EXPECT_EQ(big.st_gid, 5678u);
  EXPECT_EQ(big.st_mtime, Lstat(src + "/etc/deep/er/big").st_mtime);
  char target[64] = {};
  ASSERT_GT(::readlink((out + "/etc/deep/link").c_str(), target, sizeof target - 1), 0);
  EXPECT_STREQ(target, "../etc/hostname");
  // The extractor does not restore xattrs: read the file capability through
  // the kernel's erofs, as the guest will (loop mount, read-only).
  const std::string mnt = dir->Join("mnt");
  ASSERT_OK(MkdirAll(mnt));
  auto mounted = RunAndCapture({"/bin/mount", "-t", "erofs", "-o", "loop,ro", image, mnt}, std::chrono::seconds(60));
  ASSERT_OK(mounted);
  ASSERT_EQ(mounted->exit_code, 0) << mounted->output;
  unsigned char got[32] = {};
  ssize_t n = ::getxattr((mnt + "/ping").c_str(), "security.capability", got, sizeof got);
  EXPECT_OK(RunAndCapture({"/bin/umount", mnt}, std::chrono::seconds(60)));
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof cap)) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(got, cap, sizeof cap), 0);
}

TEST(ErofsImageTest, ErrorsNameWhatWasWrongAndLeaveNoImage) {
  auto dir = TempDir::Create("erofs");
  ASSERT_OK(dir);
  const std::string image = dir->Join("x.erofs");
  Status missing = MakeErofsImage(dir->Join("nope"), image);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find(dir->Join("nope")), std::string::npos) << missing.ToString();
  ASSERT_OK(WriteFile(dir->Join("file"), "x"));
  EXPECT_EQ(MakeErofsImage(dir->Join("file"), image).code(), Code::kInvalidArgument);
  ErofsOptions no_tool;
  no_tool.mkfs = dir->Join("mkfs.erofs");
  Status absent = MakeErofsImage(dir->path(), image, no_tool);
  EXPECT_EQ(absent.code(), Code::kFailedPrecondition);
  EXPECT_NE(absent.message().find("erofs-utils"), std::string::npos) << absent.ToString();
  // mkfs.erofs refusing (the image's dir does not exist): its words come back.
  Status refused = MakeErofsImage(dir->path(), dir->Join("no/such/dir/x.erofs"));
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("mkfs.erofs exited"), std::string::npos) << refused.ToString();
  EXPECT_FALSE(PathExists(image));
  EXPECT_FALSE(PathExists(image + ".partial"));
}

}  // namespace
}  // namespace capsule::erofs
