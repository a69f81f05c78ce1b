// The drop-in: the main file's CRI tables copied, the capsule runtime added,
// in the main file's version; and what containerd 1.6 itself makes of the
// pair (`containerd config dump` merges imports as the daemon does).
#include "runtime/install/dropin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "runtime/common/file_util.h"
#include "runtime/install/containerd_imports.h"
#include "tests/support/status_matchers.h"

namespace capsule::install {
namespace {

// Debian 12's /etc/containerd/config.toml plus a kubeadm-style runc option.
constexpr char kDebianMain[] = R"(version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "example.org/pause:9"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
)";

Result<std::string> Build(std::string_view main, int version) {
  return BuildDropin({main, "/etc/containerd/config.toml", version, "/etc/capsule/config.yaml"});
}

TEST(BuildDropin, CopiesTheCriTablesAndAddsTheRuntime) {
  auto d = Build(kDebianMain, 2);
  ASSERT_OK(d);
  EXPECT_NE(d->find("version = 2\n"), std::string::npos);
  EXPECT_NE(d->find("    sandbox_image = \"example.org/pause:9\"\n"), std::string::npos);
  EXPECT_NE(d->find("      bin_dir = \"/usr/lib/cni\"\n"), std::string::npos);
  EXPECT_NE(d->find("SystemdCgroup = true"), std::string::npos);
  EXPECT_EQ(d->find("io.containerd.internal.v1.opt"), std::string::npos) << "only the CRI plugin is copied";
  EXPECT_NE(d->find("[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.capsule]\n"
                    "  runtime_type = \"io.containerd.capsule.v2\"\n"),
            std::string::npos);
  EXPECT_NE(d->find("ConfigPath = \"/etc/capsule/config.yaml\""), std::string::npos);
}

TEST(BuildDropin, VersionOneUsesShortPluginKeysAndNoVersionLine) {
  auto d = Build("[plugins.cri]\n  sandbox_image = \"p:1\"\n[plugins.linux]\n  shim = \"x\"\n", 1);
  ASSERT_OK(d);
  EXPECT_EQ(d->find("version"), std::string::npos);
  EXPECT_NE(d->find("[plugins.cri]\n  sandbox_image = \"p:1\"\n"), std::string::npos);
  EXPECT_EQ(d->find("plugins.linux"), std::string::npos);
  EXPECT_NE(d->find("[plugins.cri.containerd.runtimes.capsule]\n"), std::string::npos);
}

TEST(BuildDropin, EmptyMainGivesOnlyTheRuntime) {
  auto d = Build("", 2);
  ASSERT_OK(d);
  EXPECT_EQ(d->find("copied from"), std::string::npos);
}

TEST(BuildDropin, ExistingCapsuleRuntimeIsRefusedWithItsLine) {
  auto d = Build("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.capsule]\n", 2);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("/etc/containerd/config.toml: line 2"), std::string::npos)
      << d.status().message();
}

TEST(BuildDropin, CriSettingsAsDottedKeysAreRefused) {
  auto d = Build("version = 2\n[plugins]\n\"io.containerd.grpc.v1.cri\".sandbox_image = \"x\"\n", 2);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("line 3"), std::string::npos) << d.status().message();
  EXPECT_FALSE(Build("plugins = {}\n", 2).ok());
}

// Runs `containerd --config <main> config dump` (no daemon is started).
std::string Dump(const std::string& main) {
  std::string cmd = "containerd --config " + main + " config dump 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  std::string out;
  char buf[4096];
  size_t n;
  while (p && (n = std::fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  return out;
}

TEST(BuildDropin, ContainerdMergesItKeepingTheUsersCriSettings) {
  if (::access("/usr/bin/containerd", X_OK) != 0) GTEST_SKIP() << "containerd is not installed (make deps)";
  auto dir = TempDir::Create("dropin-test");
  ASSERT_OK(dir);
  std::string main_path = dir->Join("config.toml");
  std::string dropin_path = dir->Join("capsule.toml");
  for (int version : {1, 2}) {
    std::string main = version == 2 ? std::string(kDebianMain)
                                     : "[plugins.cri]\n  sandbox_image = \"example.org/pause:9\"\n"
                                       "  [plugins.cri.cni]\n    bin_dir = \"/usr/lib/cni\"\n";
    auto edited = AddImport(main, dropin_path);
    auto d = BuildDropin({main, main_path, version, "/etc/capsule/config.yaml"});
    ASSERT_TRUE(edited.ok() && d.ok());
    ASSERT_OK(WriteFile(main_path, edited->text));
    ASSERT_OK(WriteFile(dropin_path, *d));
    std::string dump = Dump(main_path);
    SCOPED_TRACE("version " + std::to_string(version) + ":\n" + dump);
    EXPECT_NE(dump.find("sandbox_image = \"example.org/pause:9\""), std::string::npos);
    EXPECT_NE(dump.find("bin_dir = \"/usr/lib/cni\""), std::string::npos);
    EXPECT_NE(dump.find("runtime_type = \"io.containerd.capsule.v2\""), std::string::npos);
    EXPECT_NE(dump.find("ConfigPath = \"/etc/capsule/config.yaml\""), std::string::npos);
    if (version == 2) {
      EXPECT_NE(dump.find("SystemdCgroup = true"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace capsule::install
