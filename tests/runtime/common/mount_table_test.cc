// ParseMountInfo on mountinfo lines as proc(5) and the kernel write them:
// optional fields before the separator, escaped paths, the super-block
// options; and ReadMountTable on this process's own table.
#include <gtest/gtest.h>

#include "runtime/common/mount_table.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

TEST(MountTableTest, ParsesEveryFieldAndUnescapesPaths) {
  const std::string text =
      "36 35 98:0 /mnt1 /mnt/parent\\040dir rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
      "29 1 0:26 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,memory\n"
      "1 1 0:2 / / rw - rootfs rootfs rw\n"
      "9 1 0:3 / /d rw - tmpfs  rw,size=4k\n";  // mount -t tmpfs "" /d: an empty source
  const std::vector<MountEntry> t = ParseMountInfo(text);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].id, 36);
  EXPECT_EQ(t[0].parent_id, 35);
  EXPECT_EQ(t[0].root, "/mnt1");
  EXPECT_EQ(t[0].mount_point, "/mnt/parent dir");
  EXPECT_EQ(t[0].options, "rw,noatime");
  EXPECT_EQ(t[0].fstype, "ext3");
  EXPECT_EQ(t[0].source, "/dev/root");
  EXPECT_EQ(t[0].super_options, "rw,errors=continue");
  EXPECT_EQ(t[1].fstype, "cgroup");
  EXPECT_EQ(t[1].super_options, "rw,memory");
  EXPECT_EQ(t[2].id, t[2].parent_id) << "the rootfs is its own parent";
  EXPECT_EQ(t[3].source, "");
  EXPECT_EQ(t[3].super_options, "rw,size=4k");
}

TEST(MountTableTest, MalformedLinesAndEscapesAreSkippedNotTrusted) {
  const std::string text =
      "garbage without a separator\n"
      "x y 0:1 / /a rw - tmpfs tmpfs rw\n"         // ids not numbers
      "7 1 0:1 / /b\\08x\\ rw - tmpfs none rw\n"  // not three octal digits: kept as written
      "8 1 0:1 / /c rw -\n";                       // no fstype
  const std::vector<MountEntry> t = ParseMountInfo(text);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].mount_point, "/b\\08x\\");
}

TEST(MountTableTest, ThisProcesssTableHasARoot) {
  auto t = ReadMountTable();
  ASSERT_OK(t);
  bool root = false;
  for (const MountEntry& m : *t) root = root || m.mount_point == "/";
  EXPECT_TRUE(root);
}

}  // namespace
}  // namespace capsule::testing
