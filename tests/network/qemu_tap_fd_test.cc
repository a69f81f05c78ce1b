// The pod NIC path end to end on the host side: a TapRedirect in a pod
// netns, its tap fd handed to a real QEMU (TCG, no guest) with PassFd, and
// a virtio-net NIC hot-plugged on it (NetDevice::fd_name) and removed.
// QEMU runs in the test's (private) host netns, so only the fd can reach
// the tap, exactly as for a real pod. And the boot NIC's way: a tap QEMU
// opened in its own netns, moved into the pod's.
#include <gmock/gmock.h>
#include <fcntl.h>
#include <net/if.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/hypervisor/qemu_vmm.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"
#include "runtime/netlink/netlink_socket.h"
#include "runtime/network/netns.h"
#include "runtime/network/tap_redirect.h"
#include "tests/network/link_view.h"
#include "tests/network/pod_netns_fixture.h"
#include "tests/runtime/hypervisor/vm_test_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::network {
namespace {

using hypervisor::NetDevice;
using hypervisor::QemuVmm;
using nlohmann::json;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using testing::kPodIf;
using testing::kPodMac;
using testing::LinkView;
using testing::ViewLink;

constexpr const char* kTap = "tap_cap0";

// How many /dev/net/tun fds the process `pid` holds open.
// By device number: a jailed QEMU's fd names no host path (its /dev is
// not the host's), but it is still the tun device.
size_t TunFdsHeldBy(pid_t pid) {
  struct stat tun{};
  if (::stat("/dev/net/tun", &tun) != 0) return 0;
  size_t n = 0;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const std::string& name : hypervisor::testing::DirEntries(dir)) {
    struct stat st{};
    if (::stat((dir + "/" + name).c_str(), &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == tun.st_rdev) ++n;
  }
  return n;
}

class QemuTapFdTest : public testing::PodNetnsTest {
 protected:
  void SetUp() override {
    if (!PathExists(cfg_.hypervisor.path)) GTEST_SKIP() << cfg_.hypervisor.path << " not installed";
    ASSERT_NO_FATAL_FAILURE(PodNetnsTest::SetUp());
    if (IsSkipped()) return;
    auto dir = TempDir::Create("qemu-tapfd");
    ASSERT_OK(dir);
    root_.emplace(std::move(*dir));
    cfg_.runtime.state_dir = root_->path();
  }
  void TearDown() override {
    if (root_) {
      EXPECT_TRUE(hypervisor::testing::ProcessesMentioning(root_->path()).empty()) << "leaked a QEMU";
    }
    PodNetnsTest::TearDown();
  }

  Result<hypervisor::VmmPtr> Launch(hypervisor::QemuHypervisor& hv, const std::string& id,
                                   std::vector<hypervisor::Device> devices = {}) {
    hypervisor::VmSpec s;
    s.id = id;
    s.state_dir = hypervisor::DefaultVmStateDir(root_->path(), id);
    s.memory_mib = 128;
    s.start_paused = true;  // no guest: firmware never runs
    s.hotplug_slots = 1;
    s.devices = std::move(devices);
    return hv.Launch(s);
  }

  static Result<json> Qmp(hypervisor::Vmm& vm, const std::string& cmd, const json& args = nullptr) {
    return static_cast<QemuVmm&>(vm).qmp()->Execute(cmd, args);
  }

  config::Config cfg_;
  std::optional<TempDir> root_;
};

TEST_F(QemuTapFdTest, HotplugNicOnPassedTapFdThenUnplug) {
  hypervisor::QemuHypervisor hv(cfg_);
  auto vm = Launch(hv, "vm-tapfd");
  ASSERT_OK(vm);
  auto tap = TapRedirect::Create(pod(), kPodIf, kTap);
  ASSERT_OK(tap);
  const pid_t qemu = (*vm)->vmm_pid();
  EXPECT_EQ(TunFdsHeldBy(qemu), 0u);

  Status passed = (*vm)->PassFd("tapfd0", tap->tap_fd());
  ASSERT_OK(passed);
  EXPECT_EQ(TunFdsHeldBy(qemu), 1u) << "QEMU should hold its copy of the tap fd";
  NetDevice nic{"net0", kTap, kPodMac, "tapfd0"};
  Status plugged = (*vm)->HotplugDevice(nic);
  ASSERT_OK(plugged);

  auto mac = Qmp(**vm, "qom-get", json{{"path", "/machine/peripheral/net0"}, {"property", "mac"}});
  ASSERT_OK(mac);
  EXPECT_EQ(*mac, kPodMac);
  auto rx = Qmp(**vm, "query-rx-filter", json{{"name", "net0"}});
  ASSERT_OK(rx);
  ASSERT_EQ(rx->size(), 1u);
  EXPECT_EQ((*rx)[0]["main-mac"], kPodMac);
  // The record keeps the fd name, for an adopting process to see.
  auto rec = hypervisor::VmRecordFromJson(*ReadFile(hypervisor::VmPaths(
                                              hypervisor::DefaultVmStateDir(root_->path(), "vm-tapfd")).record()),
                                          "vm.json");
  ASSERT_OK(rec);
  ASSERT_EQ(rec->hotplugged.size(), 1u);
  EXPECT_EQ(rec->hotplugged[0].device, hypervisor::Device(nic));

  Status unplugged = (*vm)->UnplugDevice("net0", milliseconds(10000));
  ASSERT_OK(unplugged);
  EXPECT_EQ(Qmp(**vm, "qom-get", json{{"path", "/machine/peripheral/net0"}, {"property", "mac"}}).status().code(),
            Code::kNotFound);
  EXPECT_EQ(TunFdsHeldBy(qemu), 0u) << "netdev_del should close QEMU's copy";
  // Our tap and its redirect are untouched by QEMU's close.
  EXPECT_GE(tap->tap_fd(), 0);
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  ASSERT_OK(tap->Remove());
}

// guest.boot_nic's host side: QEMU opens a tap by name in its own netns at
// launch; the pod's network moves that tap into the pod's netns while QEMU
// keeps its fd, and mirrors it with the veth.
TEST_F(QemuTapFdTest, BootNicTapMovesIntoThePodNetnsWhileQemuHoldsIt) {
  hypervisor::QemuHypervisor hv(cfg_);
  const std::string boot_tap = "tap_cap_b0a0b0c";
  auto vm = Launch(hv, "vm-bootnic", {NetDevice{"netboot", boot_tap, "02:11:22:33:44:55", ""}});
  ASSERT_OK(vm);
  const pid_t qemu = (*vm)->vmm_pid();
  const std::string qemu_netns = "/proc/" + std::to_string(qemu) + "/ns/net";
  EXPECT_EQ(TunFdsHeldBy(qemu), 1u);
  ASSERT_NE(ViewLink(qemu_netns, boot_tap).index, 0) << "QEMU made no tap " << boot_tap << " in its netns";

  ASSERT_OK(TapRedirect::CheckAdoptable(qemu_netns, boot_tap, pod(), kPodIf, kTap));
  Status unchecked = TapRedirect::CheckAdoptable(qemu_netns, boot_tap, pod(), "nope0", kTap);
  EXPECT_THAT(unchecked.message(), HasSubstr("nope0"));
  EXPECT_FALSE(unchecked.ok());
  // A missing veth fails before the move: the tap stays QEMU's.
  auto bad = TapRedirect::AdoptTap(qemu_netns, boot_tap, pod(), "nope0", kTap);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("nope0"));
  EXPECT_NE(ViewLink(qemu_netns, boot_tap).index, 0);

  auto tap = TapRedirect::AdoptTap(qemu_netns, boot_tap, pod(), kPodIf, kTap);
  ASSERT_OK(tap);
  EXPECT_EQ(tap->tap_fd(), -1) << "the fd is QEMU's";
  EXPECT_EQ(ViewLink(qemu_netns, boot_tap).index, 0) << "the tap should have left QEMU's netns";
  const LinkView moved = ViewLink(pod(), kTap);
  ASSERT_NE(moved.index, 0);
  EXPECT_EQ(moved.mtu, testing::kPodMtu);
  EXPECT_TRUE(moved.up);
  EXPECT_EQ(TunFdsHeldBy(qemu), 1u);
  auto rx = Qmp(**vm, "query-rx-filter", json{{"name", "netboot"}});
  ASSERT_OK(rx);

  // Taken once: a second take-over finds nothing to move, nor a free name.
  Status taken = TapRedirect::CheckAdoptable(qemu_netns, boot_tap, pod(), kPodIf, "tap_cap1");
  EXPECT_FALSE(taken.ok());
  EXPECT_THAT(taken.message(), HasSubstr(boot_tap));
  EXPECT_EQ(TapRedirect::CheckAdoptable(qemu_netns, kTap, pod(), kPodIf, kTap).code(), Code::kAlreadyExists);
  auto again = TapRedirect::AdoptTap(qemu_netns, boot_tap, pod(), kPodIf, "tap_cap1");
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr(boot_tap));
  EXPECT_EQ(ViewLink(pod(), "tap_cap1").index, 0);

  ASSERT_OK(tap->Remove());
  EXPECT_EQ(ViewLink(pod(), kTap).index, 0);
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
}

TEST_F(QemuTapFdTest, BadFdsAndNamesGiveClearErrors) {
  hypervisor::QemuHypervisor hv(cfg_);
  auto vm = Launch(hv, "vm-badfd");
  ASSERT_OK(vm);
  Status st = (*vm)->PassFd("tapfd0", -1);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("not an open file descriptor"));
  EXPECT_THAT(st.message(), HasSubstr("vm-badfd"));
  st = (*vm)->PassFd("0tap", 0);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("fd name"));

  // A passed fd that is no tap: netdev_add fails with QEMU's reason and
  // nothing is left plugged.
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd rd(pipe_fds[0]), wr(pipe_fds[1]);
  ASSERT_TRUE((*vm)->PassFd("notatap", rd.get()).ok());
  st = (*vm)->HotplugDevice(NetDevice{"net0", "", kPodMac, "notatap"});
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("netdev_add"));
  EXPECT_TRUE(static_cast<QemuVmm&>(**vm).hotplugged().empty());
  // Nor can a name that was never passed be used.
  st = (*vm)->HotplugDevice(NetDevice{"net1", "", kPodMac, "nosuchfd"});
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(static_cast<QemuVmm&>(**vm).hotplugged().empty());
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
}

}  // namespace
}  // namespace capsule::network
