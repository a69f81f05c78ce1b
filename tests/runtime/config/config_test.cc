#include "runtime/config/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::config {
namespace {

std::string SourceDir() {
  const char* s = std::getenv("CAPSULE_SOURCE_DIR");
  return s ? s : ".";
}

TEST(ConfigTest, ShippedDefaultFileLoadsAndMatchesBuiltInDefaults) {
  auto cfg = LoadFile(SourceDir() + "/deploy/config.yaml");
  ASSERT_OK(cfg);
  Config defaults;
  defaults.source = cfg->source;
  EXPECT_EQ(ToYaml(*cfg), ToYaml(defaults));
}

// The dense handler's file: the dense device set on the serial vsock, with
// a pool, cgroup and state dir of its own so the two pools never meet.
TEST(ConfigTest, ShippedDenseFileIsTheDenseDeviceSetWithAPoolOfItsOwn) {
  auto dense = LoadFile(SourceDir() + "/deploy/dense.yaml");
  ASSERT_OK(dense);
  EXPECT_EQ(dense->guest.device_set, DeviceSet::kDense);
  EXPECT_EQ(dense->vsock.backend, VsockBackendKind::kSerial);
  const Config defaults;
  EXPECT_NE(dense->pool.socket, defaults.pool.socket);
  EXPECT_NE(dense->pool.cgroup, defaults.pool.cgroup);
  EXPECT_NE(dense->runtime.state_dir, defaults.runtime.state_dir);
  EXPECT_EQ(dense->guest.kernel, defaults.guest.kernel);
  EXPECT_EQ(dense->guest.initrd, defaults.guest.initrd);
}

TEST(ConfigTest, ValidFileLoadsTypedValues) {
  auto cfg = LoadString(R"(
hypervisor:
  path: /opt/qemu/bin/qemu-system-x86_64
  accelerator: tcg
guest:
  default_vcpus: 2
  default_memory_mib: 512
  boot_nic: false
vsock:
  backend: vhost-user
pool:
  size: 3
runtime:
  log_level: debug
  state_dir: /tmp/capsule-state
)", "test.yaml");
  ASSERT_OK(cfg);
  EXPECT_EQ(cfg->hypervisor.path, "/opt/qemu/bin/qemu-system-x86_64");
  EXPECT_FALSE(cfg->guest.boot_nic);
  EXPECT_TRUE(Config{}.guest.boot_nic);
  EXPECT_EQ(cfg->hypervisor.accelerator, Accelerator::kTcg);
  EXPECT_EQ(cfg->guest.default_vcpus, 2u);
  EXPECT_EQ(cfg->guest.default_memory_mib, 512u);
  EXPECT_EQ(cfg->vsock.backend, VsockBackendKind::kVhostUser);
  EXPECT_EQ(cfg->pool.size, 3u);
  EXPECT_EQ(cfg->runtime.log_level, log::Level::kDebug);
  EXPECT_EQ(cfg->runtime.state_dir, "/tmp/capsule-state");
  // Untouched keys keep defaults.
  EXPECT_EQ(cfg->guest.max_vcpus, GuestConfig{}.max_vcpus);
}

TEST(ConfigTest, TheSerialVsockBackendIsNamedSerial) {
  auto cfg = LoadString("vsock:\n  backend: serial\n", "s.yaml");
  ASSERT_OK(cfg);
  EXPECT_EQ(cfg->vsock.backend, VsockBackendKind::kSerial);
  EXPECT_EQ(VsockBackendName(VsockBackendKind::kSerial), "serial");
  auto bad = LoadString("vsock:\n  backend: virtio-serial\n", "s.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("serial"), std::string::npos) << bad.status().message();
}

TEST(ConfigTest, TheDenseDeviceSetTakesTheSerialVsockAndRefusesVhostUser) {
  EXPECT_EQ(Config{}.guest.device_set, DeviceSet::kVirtioFs);
  auto dense = LoadString("guest:\n  device_set: dense\n", "d.yaml");
  ASSERT_OK(dense);
  EXPECT_EQ(dense->guest.device_set, DeviceSet::kDense);
  EXPECT_EQ(dense->vsock.backend, VsockBackendKind::kSerial);  // auto resolves to the one that needs no shared RAM
  EXPECT_NE(ToYaml(*dense).find("device_set: dense"), std::string::npos);
  auto kernel = LoadString("guest:\n  device_set: dense\nvsock:\n  backend: vhost\n", "d.yaml");
  ASSERT_OK(kernel);
  EXPECT_EQ(kernel->vsock.backend, VsockBackendKind::kVhost);
  auto user = LoadString("guest:\n  device_set: dense\nvsock:\n  backend: vhost-user\n", "d.yaml");
  ASSERT_FALSE(user.ok());
  EXPECT_NE(user.status().message().find("vsock.backend"), std::string::npos) << user.status().message();
  auto typo = LoadString("guest:\n  device_set: cow\n", "d.yaml");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("virtio-fs|dense"), std::string::npos) << typo.status().message();
}

TEST(ConfigTest, ModulesAllowTakesNamesAndGlobsAndRefusesAnythingElse) {
  auto cfg = LoadString("guest:\n  modules_allow: [sctp, \"can-*\", vcan]\n", "m.yaml");
  ASSERT_OK(cfg);
  EXPECT_EQ(cfg->guest.modules_allow, (std::vector<std::string>{"sctp", "can-*", "vcan"}));
  EXPECT_TRUE(Config{}.guest.modules_allow.empty());
  for (const char* bad : {"guest:\n  modules_allow: sctp\n", "guest:\n  modules_allow: [\"a b\"]\n",
                          "guest:\n  modules_allow: [\"x,y\"]\n", "guest:\n  modules_allow: [\"\"]\n",
                          "guest:\n  modules_allow: [\"/lib/x\"]\n"}) {
    auto r = LoadString(bad, "m.yaml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("guest.modules_allow"), std::string::npos) << r.status().message();
  }
  std::string many = "guest:\n  modules_allow: [";
  for (int i = 0; i < 33; ++i) many += (i ? ",m" : "m") + std::to_string(i);
  auto r = LoadString(many + "]\n", "m.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 32"), std::string::npos) << r.status().message();
}

TEST(ConfigTest, EmptyFileGivesDefaults) {
  auto cfg = LoadString("", "empty.yaml");
  ASSERT_OK(cfg);
  EXPECT_EQ(cfg->guest.default_memory_mib, 256u);
}

TEST(ConfigTest, UnknownKeyNamesKeyLineAndFile) {
  auto cfg = LoadString("guest:\n  default_vcpus: 1\n  kernell: /x\n", "/etc/capsule/config.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(cfg.status().message(), "/etc/capsule/config.yaml:3:3: key 'guest.kernell' is unknown");
}

TEST(ConfigTest, AControlCharacterInAStringIsAnErrorNamingTheKey) {
  // Found by config_fuzzer: YAML keeps a plain scalar's trailing carriage
  // returns on load but loses one each time the value is written back.
  auto cfg = LoadString("runtime:\n  state_dir: /run/capsule\r\r\r\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), Code::kInvalidArgument);
  EXPECT_NE(cfg.status().message().find("key 'runtime.state_dir' must not contain control characters (byte 0x0d"),
            std::string::npos)
      << cfg.status().message();
  auto tab = LoadString("hypervisor:\n  kernel_params: \"a\\tb\"\n", "c.yaml");
  ASSERT_FALSE(tab.ok());
  EXPECT_NE(tab.status().message().find("hypervisor.kernel_params"), std::string::npos) << tab.status().message();
}

TEST(ConfigTest, UnknownTopLevelSection) {
  auto cfg = LoadString("network:\n  mtu: 1500\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(), "c.yaml:1:1: key 'network' is unknown");
}

TEST(ConfigTest, WrongTypeNamesKey) {
  auto cfg = LoadString("guest:\n  default_vcpus: many\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(), "c.yaml:2:18: key 'guest.default_vcpus' must be an integer, got 'many'");

  cfg = LoadString("hypervisor:\n  path: [a, b]\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("key 'hypervisor.path' must be a string"), std::string::npos);

  cfg = LoadString("guest: 5\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("key 'guest' must be a mapping"), std::string::npos);
}

TEST(ConfigTest, BadEnumListsAllowedValues) {
  auto cfg = LoadString("hypervisor:\n  accelerator: hvf\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(),
            "c.yaml:2:16: key 'hypervisor.accelerator' must be one of auto|kvm|tcg, got 'hvf'");
}

TEST(ConfigTest, OutOfRangeAndRelativePathAndBool) {
  auto cfg = LoadString("guest:\n  default_vcpus: 0\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("must be between 1 and 256, got 0"), std::string::npos);

  cfg = LoadString("guest:\n  kernel: vmlinuz\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("key 'guest.kernel' must be an absolute path"), std::string::npos);

  cfg = LoadString("hypervisor:\n  seccomp_sandbox: yes-please\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("key 'hypervisor.seccomp_sandbox' must be true or false"),
            std::string::npos);
}

// A bounded number: `field` of the built-in config is `default_value`;
// `section`.`key` set to `good` loads, reads back and is dumped; set to
// `bad`, it is refused with `refusal` in the message.
void ExpectBoundedKey(const std::string& section, const std::string& key,
                      const std::function<uint32_t(const Config&)>& field, uint32_t default_value, uint32_t good,
                      const std::string& bad, const std::string& refusal) {
  SCOPED_TRACE(section + "." + key);
  EXPECT_EQ(field(Config{}), default_value);
  auto cfg = LoadString(section + ":\n  " + key + ": " + std::to_string(good) + "\n", "c.yaml");
  ASSERT_OK(cfg);
  EXPECT_EQ(field(*cfg), good);
  EXPECT_NE(ToYaml(*cfg).find(key + ": " + std::to_string(good)), std::string::npos) << ToYaml(*cfg);
  cfg = LoadString(section + ":\n  " + key + ": " + bad + "\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find(refusal), std::string::npos) << cfg.status().message();
}

TEST(ConfigTest, AgentTimeoutHasADefaultAndIsBounded) {
  // Below half a second every call on a loaded TCG host would count as hung.
  ExpectBoundedKey("runtime", "agent_timeout_ms", [](const Config& c) { return c.runtime.agent_timeout_ms; }, 30000,
                   2500, "10", "c.yaml:2:21: key 'runtime.agent_timeout_ms' must be between 500 and 3600000");
}

TEST(ConfigTest, TheImageCacheIsBoundedByDefaultAndZeroMeansUnbounded) {
  ExpectBoundedKey("runtime", "image_cache_max_mib", [](const Config& c) { return c.runtime.image_cache_max_mib; },
                   10240, 0, "-1", "runtime.image_cache_max_mib");
}

TEST(ConfigTest, VirtiofsdHasNoThreadPoolByDefaultAndAPoolIsBounded) {
  ExpectBoundedKey("virtiofs", "thread_pool_size", [](const Config& c) { return c.virtiofs.thread_pool_size; }, 0, 4,
                   "5000", "key 'virtiofs.thread_pool_size' must be between 0 and 1024");
}

TEST(ConfigTest, DefaultAboveMaxIsRejected) {
  auto cfg = LoadString("guest:\n  default_vcpus: 4\n  max_vcpus: 2\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("'guest.default_vcpus' (4) exceeds 'guest.max_vcpus' (2)"),
            std::string::npos);
}

TEST(ConfigTest, BadYamlGivesPosition) {
  auto cfg = LoadString("guest:\n  default_vcpus: [1, 2\n", "c.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("c.yaml:"), std::string::npos);
  EXPECT_NE(cfg.status().message().find("invalid YAML"), std::string::npos);
}

TEST(ConfigTest, MissingFileNamesPath) {
  auto cfg = LoadFile("/nonexistent/capsule.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), Code::kNotFound);
  EXPECT_NE(cfg.status().message().find("/nonexistent/capsule.yaml"), std::string::npos);
}

}  // namespace
}  // namespace capsule::config

namespace capsule::config {
namespace {

TEST(ConfigJsonTest, TheJsonFormKeepsTypesAndValues) {
  auto cfg = LoadString("guest:\n  default_memory_mib: 384\nruntime:\n  log_level: debug\n", "test.yaml");
  ASSERT_OK(cfg);
  nlohmann::json j = ToJson(*cfg);
  ASSERT_TRUE(j.is_object()) << j.dump();
  EXPECT_EQ(j["guest"]["default_memory_mib"], 384) << j.dump(2);
  EXPECT_EQ(j["runtime"]["log_level"], "debug") << j.dump(2);
  EXPECT_TRUE(j["hypervisor"]["path"].is_string()) << j.dump(2);
  bool saw_bool = false;
  for (const auto& [section, fields] : j.items())
    for (const auto& [key, v] : fields.items()) saw_bool = saw_bool || v.is_boolean();
  EXPECT_TRUE(saw_bool) << "booleans stay booleans: " << j.dump(2);
}

}  // namespace
}  // namespace capsule::config
