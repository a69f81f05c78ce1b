// Storage validation: every bad field is named before anything is mounted.
// (Real mounts are exercised through the agent in agent_service_test.cc and in
// the guest by the boot test.)
#include "agent/storage/storage.h"

#include <gtest/gtest.h>

#include "agent/storage/block_device.h"
#include "agent/storage/guest_path.h"
#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

#include <sys/stat.h>

#include <thread>

namespace capsule::agent::storage {
namespace {

StorageSpec Tmpfs() { return {"tmpfs", "", "", {"size=1m"}, "/run/x"}; }

void ExpectInvalid(const StorageSpec& s, std::string_view mention) {
  Status st = ValidateStorage(s, "storages[2]");
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find(mention), std::string::npos) << st.message();
}

TEST(Storage, ValidSpecsPass) {
  EXPECT_OK(ValidateStorage(Tmpfs()));
  EXPECT_OK(ValidateStorage({"virtiofs", "capsule-shared", "virtiofs", {}, "/run/capsule/shared"}));
  EXPECT_OK(ValidateStorage({"bind", "/run/capsule/shared/a", "", {"ro"}, "/mnt/a"}));
}

TEST(Storage, UnknownDriver) { ExpectInvalid({"nfs", "x", "", {}, "/m"}, "storages[2].driver 'nfs'"); }

TEST(Storage, VirtioFsTagRequiredAndBounded) {
  ExpectInvalid({"virtiofs", "", "", {}, "/m"}, "storages[2].source");
  ExpectInvalid({"virtiofs", std::string(37, 't'), "", {}, "/m"}, "storages[2].source");
}

TEST(Storage, ABlockStorageIsAnErofsImageOnADiskNamedByItsSerial) {
  EXPECT_OK(ValidateStorage({"blk", "c1-rootfs", "erofs", {}, "/run/c1"}));
  ExpectInvalid({"blk", "", "erofs", {}, "/m"}, "storages[2].source");
  ExpectInvalid({"blk", std::string(21, 's'), "erofs", {}, "/m"}, "storages[2].source");
  ExpectInvalid({"blk", "../vda", "erofs", {}, "/m"}, "storages[2].source");
  ExpectInvalid({"blk", "c1", "ext4", {}, "/m"}, "storages[2].fstype must be erofs");
  ExpectInvalid({"blk", "c1", "", {}, "/m"}, "storages[2].fstype must be erofs");
}

// The dense device set's writable rootfs: an overlay whose lower layer is a
// mounted erofs image and whose upper layer lies on a tmpfs storage.
TEST(Storage, AnOverlayNamesItsLowerUpperAndWorkDirsAndNothingElse) {
  const StorageSpec ok{"overlay", "/run/d/c1/image", "overlay",
                       {"upperdir=/run/d/c1/rw/upper", "workdir=/run/d/c1/rw/work"}, "/run/d/c1/rootfs"};
  EXPECT_OK(ValidateStorage(ok));
  EXPECT_OK(ValidateStorage({"overlay", "/l", "", {"upperdir=/u,workdir=/w", "ro"}, "/m"}));
  ExpectInvalid({"overlay", "l", "", {"upperdir=/u", "workdir=/w"}, "/m"}, "storages[2].source");
  ExpectInvalid({"overlay", "/l:/evil", "", {"upperdir=/u", "workdir=/w"}, "/m"}, "storages[2].source");
  ExpectInvalid({"overlay", "/l", "", {"upperdir=/u"}, "/m"}, "upperdir= and a workdir=");
  ExpectInvalid({"overlay", "/l", "", {"upperdir=/u", "workdir=/w", "lowerdir=/x"}, "/m"}, "'lowerdir=/x'");
  ExpectInvalid({"overlay", "/l", "", {"upperdir=/u", "upperdir=/v", "workdir=/w"}, "/m"}, "'upperdir=/v'");
  ExpectInvalid({"overlay", "/l", "", {"upperdir=u", "workdir=/w"}, "/m"}, "upperdir");
  ExpectInvalid({"overlay", "/l", "erofs", {"upperdir=/u", "workdir=/w"}, "/m"}, "storages[2].fstype");
}

TEST(Storage, ALocalVolumeIsNamedAndTakesNoOptions) {
  EXPECT_OK(ValidateStorage({"local", "cache", "", {}, "/run/capsule/volumes/cache"}));
  ExpectInvalid({"local", "", "", {}, "/m"}, "storages[2].source must be a volume name");
  ExpectInvalid({"local", "..", "", {}, "/m"}, "storages[2].source");
  ExpectInvalid({"local", "a/b", "", {}, "/m"}, "storages[2].source");
  ExpectInvalid({"local", std::string(64, 'v'), "", {}, "/m"}, "storages[2].source");
  ExpectInvalid({"local", "cache", "", {"size=1m"}, "/m"}, "storages[2].options must be empty");
  ExpectInvalid({"local", "cache", "tmpfs", {}, "/m"}, "storages[2].fstype");
  ExpectInvalid({"local", "cache", "", {}, "/a/../m"}, "storages[2].mount_point");
}

// Made world-writable on first use, found with its files by the next
// container, never removed with a container, and never taken over when
// something else sits at its path.
TEST(Storage, ALocalVolumeOutlivesTheContainerThatMadeIt) {
  auto dir = TempDir::Create("local-volume");
  ASSERT_OK(dir);
  const StorageSpec spec{"local", "cache", "", {}, dir->path() + "/volumes/cache"};
  {
    auto first = MountedStorage::Mount(spec);
    ASSERT_OK(first);
    EXPECT_FALSE(first->mounted());
    struct stat st{};
    ASSERT_EQ(::stat(spec.mount_point.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0777u);
    ASSERT_OK(WriteFile(spec.mount_point + "/kept", "data"));
  }
  auto second = MountedStorage::Mount(spec);
  ASSERT_OK(second);
  EXPECT_EQ(ReadFile(spec.mount_point + "/kept").value_or(""), "data");
  ASSERT_OK(WriteFile(dir->path() + "/volumes/file", ""));
  auto over_a_file = MountedStorage::Mount({"local", "file", "", {}, dir->path() + "/volumes/file"});
  EXPECT_EQ(over_a_file.status().code(), Code::kFailedPrecondition) << over_a_file.status().ToString();
  EXPECT_NE(over_a_file.status().message().find("is not a directory"), std::string::npos);
}

TEST(Storage, OnlyABlockStorageNeedsModules) {
  EXPECT_TRUE(ModulesFor({Tmpfs(), {"overlay", "/l", "", {"upperdir=/u", "workdir=/w"}, "/m"},
                          {"local", "cache", "", {}, "/m"}}).empty());
  EXPECT_EQ(ModulesFor({Tmpfs(), {"blk", "c1", "erofs", {}, "/m"}}),
            (std::vector<std::string>{"crc32c_generic", "erofs"}));
}

// A SCSI unit serial number page as the kernel shows it (vpd_pg80): the
// 4-byte header (peripheral type, page 0x80, length), then the serial.
std::string VpdPage80(const std::string& serial) {
  return std::string{'\0', '\x80', '\0', static_cast<char>(serial.size())} + serial;
}

// The disk shows up in sysfs a moment after the host's hot-plug.
TEST(BlockDevice, FoundByItsSerialOnceItAppearsElseNotFoundNamingIt) {
  auto dir = TempDir::Create("sys-block");
  ASSERT_OK(dir);
  ASSERT_OK(MkdirAll(dir->Join("sda/device")));
  ASSERT_OK(WriteFile(dir->Join("sda/device/vpd_pg80"), VpdPage80("other")));
  ASSERT_OK(MkdirAll(dir->Join("sdc/device")));
  ASSERT_OK(WriteFile(dir->Join("sdc/device/vpd_pg80"), "\0\x80"));  // shorter than its header
  ASSERT_OK(MkdirAll(dir->Join("loop0")));  // no serial page
  // A page that holds the serial without the header is not a match: the
  // header is skipped, not searched.
  ASSERT_OK(MkdirAll(dir->Join("sdd/device")));
  ASSERT_OK(WriteFile(dir->Join("sdd/device/vpd_pg80"), "c1-rootfs"));
  auto dev = TempDir::Create("dev");
  ASSERT_OK(dev);
  // The disk's sysfs entry comes first, its device node a moment later.
  std::thread plug([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (void)MkdirAll(dir->Join("sdb/device"));
    (void)WriteFile(dir->Join("sdb/device/vpd_pg80"), VpdPage80("c1-rootfs"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (void)WriteFile(dev->Join("sdb"), "");
  });
  auto found = BlockDeviceBySerial("c1-rootfs", std::chrono::seconds(5), dir->path(), dev->path());
  plug.join();
  ASSERT_OK(found);
  EXPECT_EQ(*found, dev->Join("sdb"));
  auto missing = BlockDeviceBySerial("c2-rootfs", std::chrono::milliseconds(30), dir->path(), dev->path());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("c2-rootfs"), std::string::npos);
  // In sysfs but never openable: NOT_FOUND naming the node, after the wait.
  auto no_node = BlockDeviceBySerial("other", std::chrono::milliseconds(30), dir->path(), dev->path());
  EXPECT_EQ(no_node.status().code(), Code::kNotFound);
  EXPECT_NE(no_node.status().message().find(dev->Join("sda")), std::string::npos) << no_node.status().ToString();
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
  EXPECT_OK(CheckAbsolutePath("p", "/a/b..c/d"));
  EXPECT_FALSE(CheckAbsolutePath("p", "").ok());
  EXPECT_FALSE(CheckAbsolutePath("p", "/a/..").ok());
  EXPECT_FALSE(CheckAbsolutePath("p", std::string("/a\0b", 4)).ok());
  EXPECT_FALSE(CheckAbsolutePath("p", "/" + std::string(5000, 'a')).ok());
}

}  // namespace
}  // namespace capsule::agent::storage
