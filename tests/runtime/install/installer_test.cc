// Install and uninstall against a scratch root: files land in make
// install's layout, containerd's config is restored byte for byte, nothing
// is left behind, and changed or planted files are handled as promised.
#include "runtime/install/installer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "tests/support/status_matchers.h"

namespace capsule::install {
namespace {

namespace fs = std::filesystem;

constexpr char kUserConfig[] = "# the admin's containerd config\nversion = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
                               "  sandbox_image = \"example.org/pause:9\"\n";

class InstallerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = TempDir::Create("install-from");
    auto r = TempDir::Create("install-root");
    ASSERT_TRUE(t.ok() && r.ok());
    from_ = std::make_unique<TempDir>(std::move(*t));
    root_ = std::make_unique<TempDir>(std::move(*r));
    for (const char* bin : {"containerd-shim-capsule-v2", "capsule-shimd", "capsule-runtime", "capsule-vsockd"}) {
      Put(from_->path() + "/bin/" + bin, std::string("#!binary ") + bin);
      ::chmod((from_->path() + "/bin/" + bin).c_str(), 0755);
    }
    Put(from_->path() + "/share/capsule/capsule-initrd.img", "initrd");
    Put(from_->path() + "/share/capsule/vmlinux", "kernel");
    Put(from_->path() + "/share/capsule/config.yaml", "guest: {}\n");
    opts_.root = root_->path();
    opts_.from = from_->path();
  }

  static void Put(const std::string& path, const std::string& data) {
    ASSERT_OK(MkdirAll(path.substr(0, path.rfind('/'))));
    ASSERT_OK(WriteFile(path, data));
  }
  std::string InRoot(const std::string& p) const { return root_->path() + p; }
  std::string Read(const std::string& p) const { return ReadFile(InRoot(p)).value_or("<missing>"); }

  // Every path under the root, relative, sorted (directories too).
  std::vector<std::string> Tree() const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root_->path())) {
      out.push_back(fs::relative(e.path(), root_->path()).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::unique_ptr<TempDir> from_;
  std::unique_ptr<TempDir> root_;
  InstallOptions opts_;
};

TEST_F(InstallerTest, InstallThenUninstallRestoresTheConfigByteForByteAndLeavesNothing) {
  Put(InRoot("/etc/containerd/config.toml"), kUserConfig);
  // The guest module tree goes file by file; a symlink in it is not copied.
  Put(from_->path() + "/share/capsule/modules/6.1.0-9-amd64/modules.dep", "kernel/net/bridge/bridge.ko:\n");
  Put(from_->path() + "/share/capsule/modules/6.1.0-9-amd64/kernel/net/bridge/bridge.ko", "ko");
  ASSERT_EQ(::symlink("/etc/shadow", (from_->path() + "/share/capsule/modules/6.1.0-9-amd64/evil").c_str()), 0);
  ::chmod(InRoot("/etc/containerd/config.toml").c_str(), 0600);
  auto before = Tree();

  auto r = Install(opts_);
  ASSERT_OK(r);
  EXPECT_TRUE(r->containerd_config_changed);
  EXPECT_EQ(Read("/usr/local/bin/containerd-shim-capsule-v2"), "#!binary containerd-shim-capsule-v2");
  EXPECT_EQ(Read("/usr/local/bin/capsule-shimd"), "#!binary capsule-shimd") << "the shim runs it from beside itself";
  EXPECT_EQ(Read("/usr/local/share/capsule/capsule-initrd.img"), "initrd");
  EXPECT_EQ(Read("/etc/capsule/config.yaml"), "guest: {}\n");
  EXPECT_EQ(Read("/usr/local/share/capsule/modules/6.1.0-9-amd64/kernel/net/bridge/bridge.ko"), "ko");
  EXPECT_EQ(Read("/usr/local/share/capsule/modules/6.1.0-9-amd64/modules.dep"), "kernel/net/bridge/bridge.ko:\n");
  struct stat st{};
  EXPECT_NE(::lstat(InRoot("/usr/local/share/capsule/modules/6.1.0-9-amd64/evil").c_str(), &st), 0);
  ASSERT_EQ(::stat(InRoot("/usr/local/bin/capsule-vsockd").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  std::string config = Read("/etc/containerd/config.toml");
  EXPECT_NE(config.find("imports = [\"/etc/capsule/containerd-runtime.toml\"]"), std::string::npos);
  EXPECT_NE(Read("/etc/capsule/containerd-runtime.toml").find("sandbox_image = \"example.org/pause:9\""),
            std::string::npos);

  auto again = Install(opts_);
  ASSERT_OK(again);
  EXPECT_FALSE(again->containerd_config_changed);
  EXPECT_TRUE(again->written.empty());

  auto u = Uninstall(opts_);
  ASSERT_OK(u);
  EXPECT_TRUE(u->containerd_config_changed);
  EXPECT_TRUE(u->warnings.empty());
  EXPECT_EQ(Read("/etc/containerd/config.toml"), kUserConfig);
  ASSERT_EQ(::stat(InRoot("/etc/containerd/config.toml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Tree(), before);
}

TEST_F(InstallerTest, MissingContainerdConfigIsCreatedAndRemovedAgain) {
  auto r = Install(opts_);
  ASSERT_OK(r);
  EXPECT_NE(Read("/etc/containerd/config.toml").find("version = 2"), std::string::npos);
  ASSERT_OK(Uninstall(opts_));
  EXPECT_TRUE(Tree().empty()) << Tree().front();
}

TEST_F(InstallerTest, UserEditAfterInstallKeepsTheEditAndRemovesOnlyTheImport) {
  Put(InRoot("/etc/containerd/config.toml"), kUserConfig);
  ASSERT_OK(Install(opts_));
  std::string config = Read("/etc/containerd/config.toml");
  config += "  # added by the admin later\n";
  Put(InRoot("/etc/containerd/config.toml"), config);

  auto u = Uninstall(opts_);
  ASSERT_OK(u);
  ASSERT_EQ(u->warnings.size(), 1u);
  EXPECT_NE(u->warnings[0].find("edited since install"), std::string::npos);
  EXPECT_EQ(Read("/etc/containerd/config.toml"), std::string(kUserConfig) + "  # added by the admin later\n");
  EXPECT_FALSE(PathExists(InRoot("/etc/capsule/containerd-runtime.toml")));
}

TEST_F(InstallerTest, ChangedInstalledFileIsKeptWithAWarning) {
  ASSERT_OK(Install(opts_));
  Put(InRoot("/usr/local/bin/capsule-vsockd"), "patched by hand");
  auto u = Uninstall(opts_);
  ASSERT_OK(u);
  EXPECT_EQ(u->kept, std::vector<std::string>{"/usr/local/bin/capsule-vsockd"});
  ASSERT_EQ(u->warnings.size(), 1u);
  EXPECT_NE(u->warnings[0].find(InRoot("/usr/local/bin/capsule-vsockd")), std::string::npos);
  EXPECT_EQ(Read("/usr/local/bin/capsule-vsockd"), "patched by hand");
  EXPECT_FALSE(PathExists(InRoot("/usr/local/bin/capsule-runtime")));
}

TEST_F(InstallerTest, PlantedSymlinkIsNotFollowed) {
  auto outside = TempDir::Create("install-outside");
  ASSERT_OK(outside);
  ASSERT_OK(MkdirAll(InRoot("/usr/local")));
  ASSERT_EQ(::symlink(outside->path().c_str(), InRoot("/usr/local/bin").c_str()), 0);
  auto r = Install(opts_);
  ASSERT_FALSE(r.ok());
  EXPECT_REASON(r, reason::kWrongFileType);
  EXPECT_NE(r.status().message().find(InRoot("/usr/local/bin")), std::string::npos) << r.status().message();
  EXPECT_TRUE(ListDir(outside->path()).empty());
}

TEST_F(InstallerTest, SymlinkedContainerdConfigIsNotFollowed) {
  auto outside = TempDir::Create("install-outside");
  ASSERT_OK(outside);
  Put(outside->Join("config.toml"), kUserConfig);
  ASSERT_OK(MkdirAll(InRoot("/etc/containerd")));
  ASSERT_EQ(::symlink(outside->Join("config.toml").c_str(), InRoot("/etc/containerd/config.toml").c_str()), 0);
  auto r = Install(opts_);
  ASSERT_FALSE(r.ok());
  EXPECT_REASON(r, reason::kWrongFileType);
  EXPECT_NE(r.status().message().find(InRoot("/etc/containerd/config.toml")), std::string::npos)
      << r.status().message();
  EXPECT_EQ(ReadFile(outside->Join("config.toml")).value_or(""), kUserConfig);
}

TEST_F(InstallerTest, ForeignFileInTheWayIsAnErrorButAnAdminsConfigYamlIsKept) {
  Put(InRoot("/etc/capsule/config.yaml"), "admin: true\n");
  auto r = Install(opts_);
  ASSERT_OK(r);
  EXPECT_EQ(Read("/etc/capsule/config.yaml"), "admin: true\n");
  ASSERT_OK(Uninstall(opts_));
  EXPECT_EQ(Read("/etc/capsule/config.yaml"), "admin: true\n");

  Put(InRoot("/usr/local/bin/capsule-runtime"), "someone else's");
  auto again = Install(opts_);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find(InRoot("/usr/local/bin/capsule-runtime")), std::string::npos);
}

TEST_F(InstallerTest, MissingInstallTreeFileIsNamed) {
  ASSERT_EQ(::unlink((from_->path() + "/bin/capsule-vsockd").c_str()), 0);
  auto r = Install(opts_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bin/capsule-vsockd"), std::string::npos) << r.status().message();
}

TEST_F(InstallerTest, UninstallWithoutInstallDoesNothing) {
  auto u = Uninstall(opts_);
  ASSERT_OK(u);
  EXPECT_FALSE(u->containerd_config_changed);
  EXPECT_TRUE(Tree().empty());
}

}  // namespace
}  // namespace capsule::install
