// capsule.* options: good values apply, bad ones warn and keep the default.
#include "agent/config/settings.h"

#include <gtest/gtest.h>

namespace capsule::agent::config {
namespace {

BootSettings FromLine(std::string_view line) { return SettingsFromCmdline(ParseKernelCmdline(line)); }

TEST(BootSettings, DefaultsWithoutCapsuleKeys) {
  auto s = FromLine("console=ttyS0 quiet panic=-1");
  EXPECT_EQ(s.log_level, log::Level::kInfo);
  EXPECT_EQ(s.hostname, kDefaultHostname);
  EXPECT_TRUE(s.extra_modules.empty());
  EXPECT_FALSE(s.debug_shell);
  EXPECT_TRUE(s.cgroups);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(BootSettings, ReadsEveryKey) {
  auto s = FromLine("capsule.log=debug capsule.hostname=vm-1 capsule.modules=9p,virtio_rng "
                    "capsule.modules_allow=sctp,can-* capsule.debug_shell capsule.cgroups=0 capsule.vsock=serial "
                    "capsule.disks=scsi");
  EXPECT_EQ(s.log_level, log::Level::kDebug);
  EXPECT_EQ(s.hostname, "vm-1");
  EXPECT_EQ(s.extra_modules, (std::vector<std::string>{"9p", "virtio_rng"}));
  EXPECT_EQ(s.allowed_modules, (std::vector<std::string>{"sctp", "can-*"}));
  EXPECT_TRUE(s.debug_shell);
  EXPECT_FALSE(s.cgroups);
  EXPECT_TRUE(s.serial_vsock);
  EXPECT_TRUE(s.scsi_disks);
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_FALSE(FromLine("").scsi_disks);
  EXPECT_FALSE(FromLine("capsule.vsock=device").serial_vsock);
  EXPECT_TRUE(FromLine("capsule.vsock=device").warnings.empty());
}

TEST(BootSettings, BadValuesWarnAndKeepDefaults) {
  auto s = FromLine("capsule.log=loud capsule.hostname=-bad- capsule.modules=ok,no/slash capsule.cgroups=maybe "
                    "capsule.modules_allow=ok,[abc] capsule.vsock=pigeon capsule.disks=ide");
  EXPECT_EQ(s.log_level, log::Level::kInfo);
  EXPECT_EQ(s.hostname, kDefaultHostname);
  EXPECT_TRUE(s.extra_modules.empty());
  EXPECT_TRUE(s.allowed_modules.empty()) << "one bad pattern drops the key";
  EXPECT_TRUE(s.cgroups);
  EXPECT_FALSE(s.serial_vsock);
  EXPECT_FALSE(s.scsi_disks);
  ASSERT_EQ(s.warnings.size(), 7u);
  EXPECT_NE(s.warnings[0].find("capsule.log"), std::string::npos);
  EXPECT_NE(s.warnings[0].find("loud"), std::string::npos);
}

// capsule.fault belongs to the test build's fault switch (agent/faults):
// the settings only carry it, so the production agent can say it ignores it.
TEST(BootSettings, FaultIsCarriedAsGiven) {
  auto s = FromLine("capsule.fault=CreateContainer:hang,StartContainer:delay=300:once");
  EXPECT_EQ(s.fault, "CreateContainer:hang,StartContainer:delay=300:once");
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(FromLine("quiet").fault, "");
}

TEST(BootSettings, UnknownCapsuleKeyWarnsNamingIt) {
  auto s = FromLine("capsule.colour=blue");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("capsule.colour"), std::string::npos);
}

TEST(Hostname, Rfc1123) {
  EXPECT_TRUE(IsValidHostname("a"));
  EXPECT_TRUE(IsValidHostname("pod-1.example"));
  EXPECT_FALSE(IsValidHostname(""));
  EXPECT_FALSE(IsValidHostname("-a"));
  EXPECT_FALSE(IsValidHostname("a-"));
  EXPECT_FALSE(IsValidHostname("a..b"));
  EXPECT_FALSE(IsValidHostname("a_b"));
  EXPECT_FALSE(IsValidHostname(std::string(65, 'a')));
  EXPECT_TRUE(IsValidHostname(std::string(64, 'a')));
}

TEST(ModuleName, Charset) {
  EXPECT_TRUE(IsValidModuleName("vmw_vsock_virtio_transport"));
  EXPECT_TRUE(IsValidModuleName("snd-hda"));
  EXPECT_FALSE(IsValidModuleName(""));
  EXPECT_FALSE(IsValidModuleName("../x"));
  EXPECT_FALSE(IsValidModuleName(std::string(56, 'a')));
}

}  // namespace
}  // namespace capsule::agent::config
