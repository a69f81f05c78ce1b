// fstab-style options -> mount(2) flags, propagation and data.
#include "agent/storage/mount_options.h"

#include <gtest/gtest.h>
#include <sys/mount.h>

namespace capsule::agent::storage {
namespace {

TEST(MountOptions, FlagsAndDataSplit) {
  auto o = ParseMountOptions({"ro,nosuid,size=64m"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_RDONLY | MS_NOSUID));
  EXPECT_EQ(o->data, "size=64m");
  EXPECT_EQ(o->propagation, 0u);
}

TEST(MountOptions, ElementsAndCommasCombineInOrder) {
  auto o = ParseMountOptions({"nodev", "mode=0755,noexec", "uid=0"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_NODEV | MS_NOEXEC));
  EXPECT_EQ(o->data, "mode=0755,uid=0");
}

TEST(MountOptions, LaterWordWins) {
  auto o = ParseMountOptions({"ro,rw,noexec,exec,nosuid"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_NOSUID));
}

TEST(MountOptions, BindAndPropagation) {
  auto o = ParseMountOptions({"rbind,rslave"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->flags, static_cast<unsigned long>(MS_BIND | MS_REC));
  EXPECT_EQ(o->propagation, static_cast<unsigned long>(MS_SLAVE | MS_REC));
  EXPECT_TRUE(o->data.empty());
}

TEST(MountOptions, DefaultsAndEmptyListAreNothing) {
  auto a = ParseMountOptions({});
  auto b = ParseMountOptions({"defaults"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, MountOptions{});
  EXPECT_EQ(*b, MountOptions{});
}

TEST(MountOptions, EmptyWordIsInvalidAndNamesTheElement) {
  auto o = ParseMountOptions({"ro,,nosuid"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), Code::kInvalidArgument);
  EXPECT_NE(o.status().message().find("ro,,nosuid"), std::string::npos);
  EXPECT_FALSE(ParseMountOptions({""}).ok());
}

TEST(MountOptions, NulByteIsInvalid) {
  EXPECT_FALSE(ParseMountOptions({std::string("size=1m\0x", 9)}).ok());
}

TEST(MountOptions, DataLongerThanAPageIsInvalid) {
  auto o = ParseMountOptions({"x=" + std::string(5000, 'a')});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("at most"), std::string::npos);
}

}  // namespace
}  // namespace capsule::agent::storage
