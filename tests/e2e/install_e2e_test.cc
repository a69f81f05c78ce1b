// The node installer end to end: `make install`'s tree staged in a scratch
// dir, `capsule-runtime install --root R` puts it into a scratch node root R
// and imports the capsule runtime into R's containerd config (generated as
// a CRI host's, with no capsule runtime), containerd 1.6 runs on that very
// config, and a CRI pod with runtime handler `capsule` runs in a microVM
// from the installed shim, kernel and initrd. The node paths the installer
// writes (/usr/local, /etc/capsule) are R's, bound over the host's in this
// test's own mount namespace, which containerd and its shims inherit. Then
// `capsule-runtime uninstall --root R` restores containerd's config byte
// for byte and leaves none of the installed files.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "runtime/common/file_util.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/command.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/images/test_images.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string BuildDir() { return std::getenv("CAPSULE_BUILD_DIR"); }
std::string CapsuleRuntime() { return BuildDir() + "/runtime/cli/capsule-runtime"; }

std::string HostKernelRelease() {
  utsname u{};
  ::uname(&u);
  return u.release;
}

Status Bind(const std::string& from, const std::string& to) {
  if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
    return ErrnoStatus("bind " + from + " over " + to);
  return Status::Ok();
}

TEST(InstallE2eTest, AnInstalledNodeRunsACapsulePodThroughCriAndUninstallRestoresTheConfig) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (mount namespace, containerd)";
  // Our own mount namespace: the binds below are seen by this process, the
  // containerd it starts and the shims that one starts, never the host.
  ASSERT_EQ(::unshare(CLONE_NEWNS), 0);
  ASSERT_EQ(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0);
  auto env = E2eEnv::Create(true);
  ASSERT_OK(env);
  const std::string stage = env->dir() + "/stage";
  const std::string root = env->dir() + "/node";
  auto staged = RunCommand({CAPSULE_CMAKE_COMMAND, "--install", BuildDir(), "--prefix", "/usr/local"}, milliseconds(180000),
                           EnvironmentWith({{"DESTDIR", stage}}));
  ASSERT_TRUE(staged.ok() && staged->ok()) << (staged.ok() ? staged->out + staged->err : staged.status().ToString());
  // The node's own config.yaml, which the installer keeps: the installed
  // defaults (guest kernel and initrd under /usr/local/share/capsule) with
  // this test's state dir and pool socket.
  auto defaults = ReadFile(stage + "/usr/local/share/capsule/config.yaml");
  ASSERT_OK(defaults);
  std::string node_config = std::regex_replace(*defaults, std::regex("state_dir: /run/capsule"),
                                               "state_dir: " + env->state_dir());
  node_config = std::regex_replace(node_config, std::regex("socket: /run/capsule/pool.sock"),
                                   "socket: " + env->pool_socket());
  node_config = std::regex_replace(node_config, std::regex("boot_timeout_ms: 60000"), "boot_timeout_ms: 90000");
  ASSERT_NE(node_config.find(env->state_dir()), std::string::npos) << node_config;
  ASSERT_OK(MkdirAll(root + "/etc/capsule"));
  ASSERT_OK(MkdirAll(root + "/etc/containerd"));
  ASSERT_OK(WriteFile(root + "/etc/capsule/config.yaml", node_config));

  // The binds end with this process's mount namespace; the mount point it
  // made on the host's /etc goes with the test, failed or not.
  struct HostMountPoint {
    bool made = false;
    ~HostMountPoint() {
      ::umount2("/etc/capsule", MNT_DETACH);
      ::umount2("/usr/local", MNT_DETACH);
      if (made) ::rmdir("/etc/capsule");
    }
  } mount_point;
  std::string original;
  const std::string node_ctrd_config = root + "/etc/containerd/config.toml";
  ContainerdOptions o;
  o.cri.emplace();
  o.cri->cni = true;  // and no capsule runtime: the installer adds it
  o.prepare_config = [&](const std::string& generated) -> Result<std::string> {
    ASSIGN_OR_RETURN(original, ReadFile(generated));
    RETURN_IF_ERROR(WriteFile(node_ctrd_config, original));
    ASSIGN_OR_RETURN(CommandResult r, RunCommand({CapsuleRuntime(), "install", "--root", root, "--from",
                                                   stage + "/usr/local", "--containerd-config",
                                                   "/etc/containerd/config.toml", "--json"},
                                                  milliseconds(60000)));
    if (!r.ok()) return Internal("capsule-runtime install failed: " + r.out + r.err);
    auto result = nlohmann::json::parse(r.out, nullptr, false);
    if (!result.is_object()) return Internal("capsule-runtime install --json printed: " + r.out);
    EXPECT_EQ(result.value("containerd_config_changed", false), true) << r.out;
    mount_point.made = ::mkdir("/etc/capsule", 0755) == 0;  // absent on a build host: the bind needs a mount point
    RETURN_IF_ERROR(Bind(root + "/usr/local", "/usr/local"));
    RETURN_IF_ERROR(Bind(root + "/etc/capsule", "/etc/capsule"));
    return node_ctrd_config;
  };
  auto ctrd = ContainerdHarness::Start(o);
  ASSERT_OK(ctrd);
  auto node_text = ReadFile(node_ctrd_config);
  ASSERT_OK(node_text);
  EXPECT_NE(*node_text, original) << "the installer left containerd's config as it was";
  EXPECT_TRUE(PathExists("/usr/local/bin/containerd-shim-capsule-v2")) << "the shim is not on containerd's PATH";
  for (const char* image : {"busybox", "pause"}) {
    Status imported = (*ctrd)->ImportImage(TestImageTar(image), "k8s.io");
    ASSERT_OK(imported);
  }
  auto cri = cri::CriClient::Connect((*ctrd)->grpc_address(), milliseconds(20000));
  ASSERT_OK(cri);
  (*cri)->set_call_timeout(milliseconds(180000));
  cri::PodOptions pod;
  pod.name = "installed-pod";
  pod.network = ::runtime::v1::POD;
  pod.log_directory = (*ctrd)->dir() + "/pod-logs";
  pod.runtime_handler = "capsule";
  ASSERT_OK(MkdirAll(pod.log_directory));
  const auto config = cri::MakePodConfig(pod);
  auto pod_id = (*cri)->RunPod(config, "capsule");
  ASSERT_OK(pod_id) << "\n" << (*ctrd)->LogTail(20000);
  cri::ContainerOptions c;
  c.name = "hello";
  c.image = kBusyboxImage;
  c.command = {"sh", "-c", "echo from-the-installed-runtime; uname -r; sleep 600"};
  c.log_path = "hello.log";
  auto cid = (*cri)->CreateContainer(*pod_id, config, c);
  ASSERT_OK(cid);
  ASSERT_TRUE((*cri)->StartContainer(*cid).ok());
  auto exec = (*cri)->ExecSync(*cid, {"cat", "/proc/version"}, 30);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->out.find(HostKernelRelease()), std::string::npos)
      << "the container runs on the host's kernel, not in a microVM: " << exec->out;
  // It is the installed shim that serves the pod.
  bool installed_shim = false;
  for (const auto& [pid, cmd] : E2eEnv::Processes({*pod_id}))
    installed_shim = installed_shim || cmd.rfind("/usr/local/bin/capsule-shimd", 0) == 0;
  EXPECT_TRUE(installed_shim) << "no /usr/local/bin shim serves pod " << *pod_id;
  EXPECT_TRUE((*cri)->StopPod(*pod_id).ok());
  EXPECT_TRUE((*cri)->RemovePod(*pod_id).ok());
  cri->reset();
  auto leaks = env->Leaks((*ctrd)->grpc_address(), {(*ctrd)->dir()}, "k8s.io", {*pod_id});
  for (int i = 0; i < 150 && !leaks.empty(); ++i) {
    ::usleep(100 * 1000);
    leaks = env->Leaks((*ctrd)->grpc_address(), {(*ctrd)->dir()}, "k8s.io", {*pod_id});
  }
  EXPECT_TRUE(leaks.empty()) << leaks.front();
  ctrd->reset();

  ASSERT_EQ(::umount2("/usr/local", MNT_DETACH), 0);
  ASSERT_EQ(::umount2("/etc/capsule", MNT_DETACH), 0);
  auto removed = RunCommand({CapsuleRuntime(), "uninstall", "--root", root}, milliseconds(60000));
  ASSERT_TRUE(removed.ok() && removed->ok()) << (removed.ok() ? removed->out + removed->err : removed.status().ToString());
  auto after = ReadFile(node_ctrd_config);
  ASSERT_OK(after);
  EXPECT_EQ(*after, original) << "uninstall did not restore containerd's config byte for byte";
  EXPECT_FALSE(PathExists(root + "/usr/local/bin/containerd-shim-capsule-v2"));
  EXPECT_FALSE(PathExists(root + "/usr/local/share/capsule/capsule-initrd.img"));
  EXPECT_TRUE(PathExists(root + "/etc/capsule/config.yaml")) << "the node's own config.yaml is the admin's to keep";
}

}  // namespace
}  // namespace capsule::testing
