// capsule.json: `delete` (as root, after the shim died) stops the VM in
// vm_state_dir and unmounts and removes container_share_dir, so a record is
// read only when those are the dirs the shim writes (found by record_fuzzer:
// any path was taken, "/" included).
#include "shim/launcher/bundle_record.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::launcher {
namespace {

BundleRecord AsTheShimWritesIt(const std::string& state_dir = "/run/capsule/vm/pod1") {
  return {"pod1", "pod1", state_dir, state_dir + "/mounts/app", "/etc/capsule/config.yaml", 4242, 987654321, "boot-1"};
}

TEST(BundleRecordTest, WhatTheShimWritesReadsBack) {
  auto dir = TempDir::Create("capsule-bundle-record");
  ASSERT_OK(dir);
  // A state root configured with a trailing slash gives "//": still fine.
  for (const BundleRecord& r : {AsTheShimWritesIt(), AsTheShimWritesIt("/var/lib/capsule//vm/p"),
                                BundleRecord{"s", "", "", "", "", 0, 0, ""}}) {
    ASSERT_OK(WriteBundleRecord(dir->path(), r));
    auto back = ReadBundleRecord(dir->path());
    ASSERT_OK(back);
    EXPECT_EQ(*back, r);
  }
}

TEST(BundleRecordTest, ShareDirOutsideTheVmsMountsIsRefused) {
  const std::string vm = "/run/capsule/vm/pod1";
  for (const std::string& share : {std::string("/"), std::string("/etc"), vm, vm + "/mounts", vm + "/mounts/",
                                  vm + "/mounts/..", vm + "/mounts/.", vm + "/mounts/a/b", vm + "/mounts/../../x",
                                  vm + "/mountsx/a", std::string("/run/capsule/vm/pod2/mounts/app"),
                                  vm + "/mounts/app" + std::string(1, '\0') + "x"}) {
    BundleRecord r = AsTheShimWritesIt();
    r.container_share_dir = share;
    auto back = BundleRecordFromJson(BundleRecordToJson(r), "b/capsule.json");
    ASSERT_FALSE(back.ok()) << share;
    EXPECT_NE(back.status().message().find("container_share_dir"), std::string::npos) << back.status().message();
  }
  BundleRecord no_vm = AsTheShimWritesIt();
  no_vm.vm_state_dir = "";
  EXPECT_FALSE(BundleRecordFromJson(BundleRecordToJson(no_vm), "b/capsule.json").ok());
}

TEST(BundleRecordTest, VmDirMustBeAbsoluteWithoutDotParts) {
  for (const std::string vm : {"run/capsule/vm/p", "/run/capsule/../../etc", "/run/./vm/p", "/run/vm/p/.."}) {
    BundleRecord r = AsTheShimWritesIt(vm);
    auto back = BundleRecordFromJson(BundleRecordToJson(r), "b/capsule.json");
    ASSERT_FALSE(back.ok()) << vm;
    EXPECT_NE(back.status().message().find("vm_state_dir"), std::string::npos) << back.status().message();
  }
}

TEST(BundleRecordTest, AShimThatIsNotAProcessIdentityIsRefused) {
  for (const char* shim : {R"("x")", R"({"pid": 0, "start_time": 1, "boot_id": "b"})",
                           R"({"pid": -5, "start_time": 1, "boot_id": "b"})",
                           R"({"pid": 5, "start_time": -1, "boot_id": "b"})", R"({"pid": 5, "start_time": 1})",
                           R"({"pid": 99999999999, "start_time": 1, "boot_id": "b"})"}) {
    auto r = BundleRecordFromJson(std::string(R"({"sandbox_id": "s", "shim": )") + shim + "}", "b/capsule.json");
    ASSERT_FALSE(r.ok()) << shim;
    EXPECT_NE(r.status().message().find("b/capsule.json: shim must be"), std::string::npos) << r.status().message();
  }
}

TEST(BundleRecordTest, MalformedFilesNameTheFile) {
  auto r = BundleRecordFromJson(R"({"vm_id": 7})", "b/capsule.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "b/capsule.json: vm_id must be a string");
  EXPECT_FALSE(BundleRecordFromJson("[]", "b/capsule.json").ok());
  EXPECT_FALSE(BundleRecordFromJson("{", "b/capsule.json").ok());
}

}  // namespace
}  // namespace capsule::shim::launcher
