// The one mount-option table: fstab-style and OCI-style options -> mount(2)
// flags, propagation calls and data.
#include "runtime/common/mount_options.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

#include <vector>

namespace capsule {
namespace {

TEST(MountOptions, FlagsAndDataSplit) {
  auto o = ParseMountOptions("", {"ro,nosuid,size=64m"});
  ASSERT_OK(o);
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_RDONLY | MS_NOSUID));
  EXPECT_EQ(o->data, "size=64m");
  EXPECT_TRUE(o->propagation.empty());
}

TEST(MountOptions, ElementsAndCommasCombineInOrder) {
  auto o = ParseMountOptions("", {"nodev", "mode=0755,noexec", "uid=0"});
  ASSERT_OK(o);
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_NODEV | MS_NOEXEC));
  EXPECT_EQ(o->data, "mode=0755,uid=0");
}

TEST(MountOptions, LaterWordWins) {
  auto o = ParseMountOptions("", {"ro,rw,noexec,exec,nosuid"});
  ASSERT_OK(o);
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_NOSUID));
}

TEST(MountOptions, BindAndPropagation) {
  auto o = ParseMountOptions("", {"rbind,rslave"});
  ASSERT_OK(o);
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_BIND | MS_REC));
  EXPECT_EQ(o->propagation, std::vector<unsigned long>{MS_SLAVE | MS_REC});
  EXPECT_TRUE(o->data.empty());
}

TEST(MountOptions, DefaultsAndEmptyListAreNothing) {
  auto a = ParseMountOptions("", {});
  auto b = ParseMountOptions("", {"defaults"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, MountOptions{});
  EXPECT_EQ(*b, MountOptions{});
}

TEST(MountOptions, EmptyWordIsInvalidAndNamesTheElement) {
  auto o = ParseMountOptions("", {"ro,,nosuid"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), Code::kInvalidArgument);
  EXPECT_NE(o.status().message().find("ro,,nosuid"), std::string::npos);
  EXPECT_FALSE(ParseMountOptions("", {""}).ok());
}

TEST(MountOptions, NulByteIsInvalid) {
  EXPECT_FALSE(ParseMountOptions("", {std::string("size=1m\0x", 9)}).ok());
}

TEST(MountOptions, DataLongerThanAPageIsInvalid) {
  auto o = ParseMountOptions("", {"x=" + std::string(5000, 'a')});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("at most"), std::string::npos);
}

// OCI gives one word per element; the container's own mounts read them so.
TEST(MountOptions, OciWordsPropagationInOrderAndBindByType) {
  auto o = ParseMountOptions("tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k", "rprivate", "shared"});
  ASSERT_OK(o);
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_NOSUID | MS_STRICTATIME));
  EXPECT_EQ(o->data, "mode=755,size=65536k");
  EXPECT_EQ(o->propagation, (std::vector<unsigned long>{MS_PRIVATE | MS_REC, MS_SHARED}));
  EXPECT_FALSE(o->bind());
  auto bind = ParseMountOptions("bind", {});
  ASSERT_OK(bind);
  EXPECT_TRUE(bind->bind());
}

TEST(MountOptions, ClearingWordsAndBindRemountFlags) {
  auto o = ParseMountOptions("none", {"rbind", "ro", "nosuid", "suid", "rw", "noexec", "lazytime", "nolazytime"});
  ASSERT_OK(o);
  EXPECT_TRUE(o->bind());
  EXPECT_EQ(o->flags & MS_REC, static_cast<unsigned long>(MS_REC));
  EXPECT_EQ(o->flags & MS_RDONLY, 0ul);    // "rw" after "ro"
  EXPECT_EQ(o->flags & MS_NOSUID, 0ul);    // "suid" after "nosuid"
  EXPECT_EQ(o->flags & MS_LAZYTIME, 0ul);  // "nolazytime" after "lazytime"
  EXPECT_EQ(o->bind_remount_flags(), static_cast<unsigned long>(MS_NOEXEC));
  EXPECT_EQ(PropagationFlags("rslave"), static_cast<unsigned long>(MS_SLAVE | MS_REC));
  EXPECT_EQ(PropagationFlags("bogus"), 0ul);
  EXPECT_EQ(PropagationFlags(""), 0ul);
}

}  // namespace
}  // namespace capsule
