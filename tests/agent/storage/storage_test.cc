// Storage validation: every bad field is named before anything is mounted.
// (Real mounts are exercised through the agent in agent_service_test and in
// the guest by the boot test.)
#include "agent/storage/storage.h"

#include <gtest/gtest.h>

#include "agent/storage/guest_path.h"

namespace capsule::agent::storage {
namespace {

StorageSpec Tmpfs() { return {"tmpfs", "", "", {"size=1m"}, "/run/x"}; }

void ExpectInvalid(const StorageSpec& s, std::string_view mention) {
  Status st = ValidateStorage(s, "storages[2]");
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(mention), std::string::npos) << st.message();
}

TEST(Storage, ValidSpecsPass) {
  EXPECT_TRUE(ValidateStorage(Tmpfs()).ok());
  EXPECT_TRUE(ValidateStorage({"virtiofs", "capsule-shared", "virtiofs", {}, "/run/capsule/shared"}).ok());
  EXPECT_TRUE(ValidateStorage({"bind", "/run/capsule/shared/a", "", {"ro"}, "/mnt/a"}).ok());
}

TEST(Storage, UnknownDriver) { ExpectInvalid({"nfs", "x", "", {}, "/m"}, "storages[2].driver 'nfs'"); }

TEST(Storage, VirtioFsTagRequiredAndBounded) {
  ExpectInvalid({"virtiofs", "", "", {}, "/m"}, "storages[2].source");
  ExpectInvalid({"virtiofs", std::string(37, 't'), "", {}, "/m"}, "storages[2].source");
}

TEST(Storage, FstypeMustFitDriver) { ExpectInvalid({"tmpfs", "", "ext4", {}, "/m"}, "storages[2].fstype"); }

TEST(Storage, MountPointChecks) {
  auto s = Tmpfs();
  s.mount_point = "relative/path";
  ExpectInvalid(s, "storages[2].mount_point");
  s.mount_point = "/a/../etc";
  ExpectInvalid(s, "..");
  s.mount_point = "/";
  ExpectInvalid(s, "must not be /");
}

TEST(Storage, BindSourceMustBeAbsolute) { ExpectInvalid({"bind", "src", "", {}, "/m"}, "storages[2].source"); }

TEST(Storage, BadOptionsNamed) {
  auto s = Tmpfs();
  s.options = {"ro,,x"};
  ExpectInvalid(s, "storages[2].options");
}

TEST(GuestPath, Checks) {
  EXPECT_TRUE(CheckAbsolutePath("p", "/a/b..c/d").ok());
  EXPECT_FALSE(CheckAbsolutePath("p", "").ok());
  EXPECT_FALSE(CheckAbsolutePath("p", "/a/..").ok());
  EXPECT_FALSE(CheckAbsolutePath("p", std::string("/a\0b", 4)).ok());
  EXPECT_FALSE(CheckAbsolutePath("p", "/" + std::string(5000, 'a')).ok());
}

}  // namespace
}  // namespace capsule::agent::storage
