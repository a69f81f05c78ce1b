// capsule.json: `delete` (as root, after the shim died) stops the VM in
// vm_state_dir and unmounts and removes container_share_dir, so a record is
// read only when those are the dirs the shim writes (found by record_fuzzer:
// any path was taken, "/" included).
#include "shim/task/bundle_record.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::task {
namespace {

BundleRecord AsTheShimWritesIt(const std::string& state_dir = "/run/capsule/vm/pod1") {
  return {"pod1", "pod1", state_dir, state_dir + "/mounts/app", "/etc/capsule/config.yaml"};
}

TEST(BundleRecordTest, WhatTheShimWritesReadsBack) {
  auto dir = TempDir::Create("capsule-bundle-record");
  ASSERT_OK(dir);
  // A state root configured with a trailing slash gives "//": still fine.
  for (const BundleRecord& r : {AsTheShimWritesIt(), AsTheShimWritesIt("/var/lib/capsule//vm/p"),
                                BundleRecord{"s", "", "", "", ""}}) {
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

TEST(BundleRecordTest, MalformedFilesNameTheFile) {
  auto r = BundleRecordFromJson(R"({"vm_id": 7})", "b/capsule.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "b/capsule.json: vm_id must be a string");
  EXPECT_FALSE(BundleRecordFromJson("[]", "b/capsule.json").ok());
  EXPECT_FALSE(BundleRecordFromJson("{", "b/capsule.json").ok());
}

}  // namespace
}  // namespace capsule::shim::task
