#include "runtime/hypervisor/vm_record.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_spec.h"
#include "tests/support/status_matchers.h"

namespace capsule::hypervisor {
namespace {

using nlohmann::json;

VmRecord FullRecord() {
  VmRecord r;
  r.hypervisor = "qemu";
  r.spec.id = "pod-1";
  r.spec.state_dir = "/run/capsule/vm/pod-1";
  r.spec.vcpus = 2;
  r.spec.memory_mib = 512;
  r.spec.kernel = "/k";
  r.spec.initrd = "/i";
  r.spec.kernel_cmdline = "console=ttyS0";
  r.spec.extra_kernel_params = "x=1";
  r.spec.accelerator = config::Accelerator::kTcg;
  r.spec.devices = {FsShare{"fs0", "/run/fs.sock", "tag", 512},
                    VsockDevice{"vsock0", VsockDevice::Backend::kVhostKernel, 9, ""},
                    VsockDevice{"vsock2", VsockDevice::Backend::kSerial, 3, "/run/s.sock"}};
  r.spec.console_log = "/run/capsule/vm/pod-1/console.log";
  r.spec.start_paused = true;
  r.spec.hotplug_slots = 3;
  r.spec.scsi_controller = true;
  r.spec.memory_file = "/run/capsule/templates/k/ram";
  r.spec.incoming = true;
  r.spec.vmgenid = true;
  r.spec.agent_token = std::string(32, 'a') + std::string(32, '9');
  r.spec.extra_args = {"-device", "virtio-rng-pci"};
  r.accelerator = Accelerator::kTcg;
  r.vmm = ProcessIdentity{1234, 987654321, "boot-id"};
  r.vmm_binary = "/usr/bin/qemu-system-x86_64";
  r.vmm_version = "7.2.22";
  r.qmp_socket = "/run/capsule/vm/pod-1/qmp.sock";
  r.vmm_log = "/run/capsule/vm/pod-1/qemu.log";
  r.hotplugged = {{NetDevice{"eth0", "tap0", "52:54:00:00:00:01", ""}, "rp0"},
                  {VsockDevice{"vsock1", VsockDevice::Backend::kVhostUser, 0, "/run/v.sock"}, "rp1"},
                  {NetDevice{"eth1", "tap_cap1", "52:54:00:00:00:02", "tapfd1"}, "rp2"},
                  {BlockDevice{"rootfs1", "/var/lib/capsule/erofs/x.erofs", "c1-rootfs", false, -1}, "scsi0.0"}};
  return r;
}

TEST(VmRecordTest, RoundTripsEveryField) {
  VmRecord r = FullRecord();
  auto back = VmRecordFromJson(VmRecordToJson(r), "vm.json");
  ASSERT_OK(back);
  EXPECT_EQ(*back, r);
}

TEST(VmSpecTest, ABlockDeviceIsHotPluggedNotAttachedAtBoot) {
  VmSpec s = FullRecord().spec;
  s.devices = {BlockDevice{"rootfs1", "/x.erofs", "c1", false, 3}};
  Status st = ValidateVmSpec(s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("hot-plugged"), std::string::npos) << st.ToString();
}

TEST(VmSpecTest, CopyOnWriteRamWithOnlyMigratableDevicesPasses) {
  VmSpec s = FullRecord().spec;
  s.memory_private = true;
  s.devices = {VsockDevice{"v", VsockDevice::Backend::kVhostKernel, 9, ""}};
  EXPECT_OK(ValidateVmSpec(s));
  s.devices = {VsockDevice{"v", VsockDevice::Backend::kSerial, 3, "/run/s.sock"}};
  EXPECT_OK(ValidateVmSpec(s)) << "a serial vsock lives in QEMU: " << ValidateVmSpec(s).ToString();
}

TEST(VmRecordTest, RecordWithoutFdNameStillReads) {
  // Records written before fd passing have no "fd_name" key.
  json j = json::parse(VmRecordToJson(FullRecord()));
  for (auto& h : j["hotplugged"]) h.erase("fd_name");
  auto back = VmRecordFromJson(j.dump(), "vm.json");
  ASSERT_OK(back);
  EXPECT_EQ(std::get<NetDevice>(back->hotplugged[2].device).fd_name, "");
}

TEST(VmSpecTest, HotpluggedNicMayGoByFdAlone) {
  EXPECT_OK(ValidateDevice(NetDevice{"eth0", "", "52:54:00:00:00:01", "tapfd0"}));
  EXPECT_TRUE(IsValidFdName("tap_fd.0-a"));
  EXPECT_FALSE(IsValidFdName("0tap"));
  EXPECT_FALSE(IsValidFdName(""));
  EXPECT_FALSE(IsValidFdName(std::string(33, 'a')));
}

TEST(VmRecordTest, ErrorsNameTheFieldAndFile) {
  json j = json::parse(VmRecordToJson(FullRecord()));
  struct Case {
    std::function<void(json&)> edit;
    std::string want;
  };
  std::vector<Case> cases = {
      {[](json& x) { x["spec"]["vcpus"] = "two"; }, "/s/vm.json: spec.vcpus: must be an integer"},
      {[](json& x) { x["vmm"].erase("pid"); }, "/s/vm.json: vmm.pid: required"},
      {[](json& x) { x["version"] = 99; }, "/s/vm.json: version: format 99 is not supported (this build reads 1)"},
      {[](json& x) { x["spec"]["devices"][0]["kind"] = "gpu"; }, "/s/vm.json: spec.devices[0].kind: unknown device kind 'gpu'"},
      {[](json& x) { x["hotplugged"][1]["backend"] = "x"; }, "/s/vm.json: hotplugged[1].backend: must be 'vhost', 'vhost-user' or 'serial'"},
      {[](json& x) { x["accelerator"] = "hvf"; }, "/s/vm.json: accelerator: must be kvm or tcg"},
      {[](json& x) { x["spec"]["extra_args"] = {1}; }, "/s/vm.json: spec.extra_args[0]: must be a string"},
      {[](json& x) { x["spec"]["agent_token"] = "ABC"; }, "/s/vm.json: spec.agent_token: must be 64 lowercase hex digits"},
  };
  for (const Case& c : cases) {
    json copy = j;
    c.edit(copy);
    auto r = VmRecordFromJson(copy.dump(), "/s/vm.json");
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(VmRecordFromJson("{", "/s/vm.json").status().message().rfind("/s/vm.json: vm record: invalid JSON at byte 2", 0), 0u)
      << VmRecordFromJson("{", "/s/vm.json").status().message();
  EXPECT_EQ(VmRecordFromJson("[]", "/s/vm.json").status().message(), "/s/vm.json: (root): must be an object");
  // A pid of 0 or below, or a uid outside -1..2^32-1, is refused, not wrapped.
  json bad = j;
  bad["vmm"]["pid"] = 0;
  EXPECT_EQ(VmRecordFromJson(bad.dump(), "v").status().message(), "v: vmm.pid: must be between 1 and 2147483647, got 0");
  bad = j;
  bad["vmm"]["uid"] = -2;
  EXPECT_EQ(VmRecordFromJson(bad.dump(), "v").status().message(), "v: vmm.uid: must be between -1 and 4294967295, got -2");
}

TEST(VmSpecTest, ValidSpecPasses) {
  VmSpec s = FullRecord().spec;
  EXPECT_OK(ValidateVmSpec(s));
}

TEST(VmSpecTest, RejectionsNameTheField) {
  struct Case {
    std::function<void(VmSpec&)> edit;
    std::string want;
  };
  std::vector<Case> cases = {
      {[](VmSpec& s) { s.id = "../x"; }, "id '../x' must be"},
      {[](VmSpec& s) { s.id = std::string(65, 'a'); }, "must be 1..64 chars"},
      {[](VmSpec& s) { s.vcpus = 0; }, "vm spec 'pod-1': vcpus must be 1..255, got 0"},
      {[](VmSpec& s) { s.memory_mib = 8; }, "memory_mib must be at least 16, got 8"},
      {[](VmSpec& s) { s.state_dir = "rel"; }, "state_dir must be absolute"},
      {[](VmSpec& s) { s.hotplug_slots = 33; }, "hotplug_slots must be at most 32"},
      {[](VmSpec& s) { s.kernel.clear(); }, "initrd or kernel_cmdline given without a kernel"},
      {[](VmSpec& s) { s.console_log = "/a,b"; }, "must not contain ','"},
      {[](VmSpec& s) { s.devices.push_back(FsShare{"fs0", "/x.sock", "t", 1024}); }, "device id 'fs0' used twice"},
      {[](VmSpec& s) { s.devices = {FsShare{"fs0", "/x.sock", "t", 1000}}; }, "queue_size must be a power of two"},
      {[](VmSpec& s) { s.devices = {FsShare{"fs0", "/" + std::string(200, 'a'), "t", 1024}}; }, "unix sockets allow 107"},
      {[](VmSpec& s) { s.devices = {NetDevice{"0nic", "tap0", "52:54:00:00:00:01", ""}}; }, "net device id '0nic' must match"},
      {[](VmSpec& s) { s.devices = {NetDevice{"rp3", "tap0", "52:54:00:00:00:01", ""}}; }, "reserved for hot-plug ports"},
      {[](VmSpec& s) { s.devices = {NetDevice{"n", "tap0", "01:00:5e:00:00:01", ""}}; }, "not a unicast"},
      {[](VmSpec& s) { s.devices = {NetDevice{"n", "a-very-long-tap-name", "52:54:00:00:00:01", ""}}; }, "tap_name must be 1..15"},
      {[](VmSpec& s) { s.devices = {NetDevice{"n", "", "52:54:00:00:00:01", ""}}; }, "tap_name must be 1..15"},
      {[](VmSpec& s) { s.devices = {NetDevice{"n", "tap0", "52:54:00:00:00:01", "1fd"}}; }, "fd_name '1fd' must match"},
      {[](VmSpec& s) { s.devices = {NetDevice{"n", "tap0", "52:54:00:00:00:01", "a,b"}}; }, "fd_name 'a,b' must match"},
      {[](VmSpec& s) { s.devices = {NetDevice{"n", "", "52:54:00:00:00:01", "tapfd"}}; }, "fd_name works for hot-plug only"},
      {[](VmSpec& s) { s.devices = {VsockDevice{"v", VsockDevice::Backend::kVhostKernel, 2, ""}}; }, "guest_cid must be 3.."},
      {[](VmSpec& s) { s.memory_fd = 5; }, "memory_file and memory_fd are exclusive"},
      {[](VmSpec& s) { s.agent_token = "secret"; }, "agent_token must be 64 lowercase hex digits"},
      {[](VmSpec& s) { s.memory_file = "ram"; }, "memory_file must be absolute"},
      {[](VmSpec& s) { s.memory_file = "/a,b"; }, "memory_file '/a,b' must not contain ','"},
      {[](VmSpec& s) { s.memory_file.clear(); s.memory_private = true; }, "memory_private needs a memory_file"},
      // Copy-on-write guest RAM and a vhost-user back end: silent corruption.
      {[](VmSpec& s) { s.memory_private = true; }, "device 'fs0' is vhost-user"},
      {[](VmSpec& s) {
         s.memory_private = true;
         s.devices = {VsockDevice{"v", VsockDevice::Backend::kVhostUser, 0, "/v.sock"}};
       }, "device 'v' is vhost-user"},
  };
  for (const Case& c : cases) {
    VmSpec s = FullRecord().spec;
    c.edit(s);
    Status st = ValidateVmSpec(s);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.want;
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.message();
  }
}

// A VM state dir of its own for each case.
class VmPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("vmpaths");
    ASSERT_OK(dir);
    dir_.emplace(std::move(*dir));
    p = VmPaths(dir_->Join("vm1"));
    ASSERT_OK(MkdirAll(p.dir));
  }
  std::optional<TempDir> dir_;
  VmPaths p{""};
};

TEST_F(VmPathsTest, LockIsExclusiveAndRemovedWithTheFiles) {
  EXPECT_EQ(VmLock::Acquire(p.lock(), false).status().code(), Code::kNotFound);
  auto lock = VmLock::Acquire(p.lock(), true);
  ASSERT_OK(lock);
  auto second = VmLock::Acquire(p.lock(), false);
  EXPECT_EQ(second.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("driven by another process"), std::string::npos);
  ASSERT_OK(WriteFile(p.record(), "{}"));
  ASSERT_OK(WriteFile(p.console_log(), "x"));
  ASSERT_OK(RemoveVmmFiles(p, p.console_log(), *lock));
  EXPECT_FALSE(lock->held());
  EXPECT_FALSE(PathExists(p.dir));
  EXPECT_EQ(DefaultVmStateDir("/run/capsule/", "a"), "/run/capsule/vm/a");
}

TEST_F(VmPathsTest, AWaitForTheLockEndsWhenItsHolderLetsGoOrItsTimeRunsOut) {
  auto lock = VmLock::Acquire(p.lock(), true);
  ASSERT_OK(lock);
  const auto before = std::chrono::steady_clock::now();
  auto late = VmLock::Acquire(p.lock(), false, std::chrono::milliseconds(30));
  EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(30)) << "it did not wait";
  EXPECT_EQ(late.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("waited 30 ms"), std::string::npos) << late.status().message();
  std::thread holder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    *lock = VmLock();  // closes its file, so the flock goes with it
  });
  auto waited = VmLock::Acquire(p.lock(), false, std::chrono::seconds(10));
  holder.join();
  ASSERT_OK(waited);
  EXPECT_TRUE(waited->held());
}

TEST_F(VmPathsTest, DirWithOtherComponentsFilesIsKept) {
  auto lock = VmLock::Acquire(p.lock(), true);
  ASSERT_OK(lock);
  ASSERT_OK(WriteFile(p.dir + "/virtiofsd.pid", "1"));
  ASSERT_OK(RemoveVmmFiles(p, p.console_log(), *lock));
  EXPECT_TRUE(PathExists(p.dir + "/virtiofsd.pid"));
  EXPECT_FALSE(PathExists(p.lock()));
}

}  // namespace
}  // namespace capsule::hypervisor
