// Finding the serial vsock's port by name, as the agent does at boot, on a
// sysfs-shaped tree (the real one is exercised by sandbox_vm_test's serial
// VM, where the agent serves through it; the link itself by the vsock
// tests, with both ends real).
#include "agent/channel/serial_vsock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::channel {
namespace {

TEST(FindVirtioPortTest, FindsThePortByItsNameAmongOthers) {
  auto dir = TempDir::Create("virtio-ports");
  ASSERT_OK(dir);
  ASSERT_OK(MkdirAll(dir->Join("vport0p0")));
  ASSERT_OK(WriteFile(dir->Join("vport0p0/name"), "org.qemu.guest_agent.0\n"));
  ASSERT_OK(MkdirAll(dir->Join("vport1p1")));
  ASSERT_OK(WriteFile(dir->Join("vport1p1/name"), "capsule.vsock\n"));
  ASSERT_OK(MkdirAll(dir->Join("vport1p2")));  // a port without a name file
  auto port = FindVirtioPort("capsule.vsock", {}, dir->path(), "/dev");
  ASSERT_OK(port);
  EXPECT_EQ(*port, "/dev/vport1p1");
}

TEST(FindVirtioPortTest, APrefixOrAMissingTreeIsNotFoundAndSaysWhatWasLookedFor) {
  auto dir = TempDir::Create("virtio-ports");
  ASSERT_OK(dir);
  ASSERT_OK(MkdirAll(dir->Join("vport0p1")));
  ASSERT_OK(WriteFile(dir->Join("vport0p1/name"), "capsule.vsock.old\n"));
  auto port = FindVirtioPort("capsule.vsock", {}, dir->path());
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), Code::kNotFound);
  EXPECT_NE(port.status().message().find("capsule.vsock"), std::string::npos);
  auto none = FindVirtioPort("capsule.vsock", {}, dir->Join("absent"));
  EXPECT_EQ(none.status().code(), Code::kNotFound);
}

TEST(FindVirtioPortTest, AWaitSeesAPortThatAppearsLaterAndGivesUpWithinItsTime) {
  auto dir = TempDir::Create("virtio-ports");
  ASSERT_OK(dir);
  const auto before = std::chrono::steady_clock::now();
  auto none = FindVirtioPort("capsule.vsock", std::chrono::milliseconds(30), dir->path());
  EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(30)) << "it did not wait";
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  EXPECT_NE(none.status().message().find("within 30 ms"), std::string::npos) << none.status().message();
  std::thread hotplug([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_OK(MkdirAll(dir->Join("vport2p1")));
    ASSERT_OK(WriteFile(dir->Join("vport2p1/name"), "capsule.vsock\n"));
  });
  auto port = FindVirtioPort("capsule.vsock", std::chrono::seconds(10), dir->path(), "/dev");
  hotplug.join();
  ASSERT_OK(port);
  EXPECT_EQ(*port, "/dev/vport2p1");
}

TEST(SerialVsockTest, ListenPathsFollowTheMuxersPortConvention) {
  EXPECT_EQ(SerialVsock::ListenPath("/run/capsule-agent/vsock", 1024), "/run/capsule-agent/vsock_1024");
}

TEST(SerialVsockTest, APortThatCannotBeOpenedIsAnErrorNamingIt) {
  auto sv = SerialVsock::Start("/nonexistent/vport9p9", "/tmp/x");
  ASSERT_FALSE(sv.ok());
  EXPECT_NE(sv.status().message().find("/nonexistent/vport9p9"), std::string::npos) << sv.status().message();
}

}  // namespace
}  // namespace capsule::agent::channel
