// One real boot of the built kernel + initrd under QEMU TCG. From the serial
// console alone it checks that capsule-agent ran as PID 1, moved root off the
// initramfs, mounted the API filesystems and cgroup2 with its controllers,
// loaded every module of the image's boot set (the vsock transport among
// them) and is serving on vsock port 1024; then that Ctrl-Alt-Del (SIGINT
// to PID 1) powers the VM off cleanly. Dialing the agent over vsock needs the
// host's vsock back end and is the integration tests' job.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>

#include "agent/modules/image_layout.h"
#include "agent/modules/module_index.h"
#include "deploy/mkinitrd/tools.h"
#include "runtime/common/version.h"
#include "runtime/wire/guest_abi.h"
#include "tests/agent/boot/qemu_guest.h"
#include "tests/deploy/cpio_reader.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::testing {
namespace {

constexpr std::chrono::milliseconds kBootTimeout(180000);  // TCG on a loaded 2-core CI host
constexpr std::chrono::milliseconds kPowerOffTimeout(60000);

// Module names in the boot order file of the image under test, read from
// the image itself.
std::vector<std::string> BootModules() {
  const char* build = std::getenv("CAPSULE_BUILD_DIR");
  const std::string image = std::string(build ? build : ".") + "/deploy/capsule-initrd.img";
  auto dir = TempDir::Create("img");
  auto zstd = deploy::FindProgram("zstd", "zstd");
  EXPECT_TRUE(dir.ok() && zstd.ok());
  EXPECT_OK(deploy::RunFilter({*zstd, "-dc"}, image, dir->Join("raw")));
  std::string error;
  auto entries = deploy::testing::ReadCpio(ReadFile(dir->Join("raw")).value_or(""), &error);
  EXPECT_EQ(error, "");
  std::vector<std::string> names;
  for (const auto& e : entries) {
    if (!e.name.ends_with(std::string("/") + modules::kBootOrderFile)) continue;
    size_t pos = 0;
    while (pos < e.data.size()) {
      size_t nl = e.data.find('\n', pos);
      std::string line = e.data.substr(pos, nl - pos);
      pos = nl + 1;
      if (!line.empty() && line[0] != '#') names.push_back(modules::ModuleNameFromPath(line));
    }
  }
  return names;
}

TEST(AgentBoot, BootsServesAndPowersOffOnCtrlAltDel) {
  // capsule.modules loads a shipped, non-boot module by name (with its
  // dependencies) through the same path as CreateSandbox.kernel_modules.
  GuestBootOptions options;
  options.extra_append = "capsule.modules=9pnet_virtio,9p";
  auto guest = QemuGuest::Boot(options);
  ASSERT_OK(guest);
  QemuGuest& g = **guest;
  std::cerr << "QEMU: " << g.CommandLine() << "\n";

  auto ready = g.WaitForLine(guest_abi::kAgentReadyMarker, kBootTimeout);
  ASSERT_OK(ready);
  EXPECT_NE(ready->find(fmt::format("vsock:{}", guest_abi::kAgentVsockPort)), std::string::npos) << *ready;
  const std::string& log = g.console();

  EXPECT_NE(log.find(fmt::format("capsule-agent {} starting (pid 1, init)", kVersion)), std::string::npos) << log;
  EXPECT_NE(log.find("root moved off the initramfs"), std::string::npos) << log;
  EXPECT_NE(log.find("mounted /proc,/sys,/dev,/dev/pts,/dev/shm,/run,/tmp,/sys/fs/cgroup"), std::string::npos)
      << log;
  auto cgroups = g.WaitForLine("cgroup2 controllers enabled:", std::chrono::milliseconds(1));
  ASSERT_OK(cgroups) << log;
  for (const char* c : {"cpu", "io", "memory", "pids"}) EXPECT_NE(cgroups->find(c), std::string::npos) << *cgroups;
  // As the kernel shows it: joining a cgroup waits for no RCU grace period.
  auto cgroup_options = g.WaitForLine("/sys/fs/cgroup mounted with", std::chrono::milliseconds(1));
  ASSERT_OK(cgroup_options) << log;
  EXPECT_NE(cgroup_options->find("nsdelegate,favordynmods"), std::string::npos) << *cgroup_options;

  auto modules = BootModules();
  ASSERT_FALSE(modules.empty());
  EXPECT_NE(std::find(modules.begin(), modules.end(), "vmw_vsock_virtio_transport"), modules.end());
  for (const auto& m : modules) {
    EXPECT_NE(log.find("loaded module " + m + "\n"), std::string::npos) << m << " not loaded:\n" << log;
  }
  EXPECT_NE(log.find(fmt::format("kernel modules: {} loaded, 0 already loaded, 0 built in, 0 failed", modules.size())),
            std::string::npos)
      << log;
  for (const char* m : {"9pnet", "9pnet_virtio", "netfs", "fscache", "9p"}) {
    EXPECT_NE(log.find(std::string("loaded module ") + m + "\n"), std::string::npos) << m << ":\n" << log;
  }
  EXPECT_EQ(log.find(" error "), std::string::npos) << "error lines in the boot log:\n" << log;

  // Ctrl-Alt-Del reaches PID 1 as SIGINT (RB_DISABLE_CAD): orderly power-off.
  ASSERT_OK(g.SendCtrlAltDel());
  auto exit_code = g.WaitExit(kPowerOffTimeout);
  ASSERT_OK(exit_code) << "\n" << g.console();
  EXPECT_EQ(*exit_code, 0);
  EXPECT_NE(g.console().find("stopping: signal Interrupt"), std::string::npos) << g.console();
  EXPECT_NE(g.console().find("powering off"), std::string::npos) << g.console();
  EXPECT_EQ(g.console().find("Kernel panic"), std::string::npos) << g.console();
}

}  // namespace
}  // namespace capsule::agent::testing
