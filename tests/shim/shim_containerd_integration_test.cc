// containerd-shim-capsule-v2's launcher against a real containerd 1.6, via
// ctr and via CRI, without booting a VM: the runtime options name a config
// file that does not exist, so every Create fails with that error (which
// must reach the user) and no VM starts. What this checks is the protocol
// around the Task service: containerd finds and runs `start` with our flags
// and runtime options and copies the shim's log FIFO into its log; after a
// restart it runs `delete` for a dead shim and accepts its DeleteResponse;
// nothing (socket, daemon, bundle) is left behind. tests/e2e runs real pods.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>

#include "runtime/common/file_util.h"
#include "shim/launcher/socket.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/images/test_images.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using std::chrono::milliseconds;

constexpr const char* kNs = "k8s.io";  // CRI's namespace

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    if (e->d_name[0] != '.') out.insert(e->d_name);
  }
  if (d != nullptr) ::closedir(d);
  return out;
}

std::string Dirname(const std::string& path) { return path.substr(0, path.rfind('/')); }

class ShimWithContainerdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ContainerdOptions o;
    // containerd 1.6.20's CRI ignores runtime_path (the task request never
    // carries it), so the shim is found by name on containerd's PATH, as an
    // installed shim would be.
    o.path_prepend = {Dirname(CAPSULE_SHIM_BINARY)};
    o.cri.emplace();
    o.cri->runtimes = {{"capsule", "io.containerd.capsule.v2", {{"ConfigPath", "/etc/capsule/from-cri.yaml"}}}};
    auto c = ContainerdHarness::Start(o);
    ASSERT_OK(c);
    ctrd_ = std::move(*c);
    for (const char* image : {"busybox", "pause"}) {
      Status imported = ctrd_->ImportImage(TestImageTar(image), kNs);
      ASSERT_OK(imported);
    }
    sockets_before_ = Entries(std::string(shim::launcher::kDefaultSocketDir));
  }
  void TearDown() override {
    if (!ctrd_) return;
    auto leaks = ctrd_->Leaks();
    EXPECT_TRUE(leaks.empty()) << leaks.front();
    EXPECT_EQ(Entries(std::string(shim::launcher::kDefaultSocketDir)), sockets_before_)
        << "a shim socket was left in " << shim::launcher::kDefaultSocketDir;
    EXPECT_TRUE(Entries(ctrd_->state() + "/io.containerd.runtime.v2.task/k8s.io").empty())
        << "a bundle was left behind";
  }
  std::string Log() { return ReadFile(ctrd_->log_path()).value_or(""); }
  // `ctr -n k8s.io args...` that must succeed: its stdout.
  Result<std::string> Ctr(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"-n", kNs};
    argv.insert(argv.end(), args.begin(), args.end());
    return ctrd_->CtrOutput(argv);
  }

  std::unique_ptr<ContainerdHarness> ctrd_;
  std::set<std::string> sockets_before_;
};

TEST_F(ShimWithContainerdTest, CtrRunStartsTheShimWithItsFlagsAndOptions) {
  auto run = Ctr({"run", "--runtime", CAPSULE_SHIM_BINARY, "--runtime-config-path",
                         "/etc/capsule/from-ctr.yaml", kBusyboxImage, "shim-ctr-1", "true"});
  ASSERT_FALSE(run.ok()) << "the config file is missing: creating the task must fail";
  EXPECT_NE(run.status().message().find("/etc/capsule/from-ctr.yaml"), std::string::npos)
      << "the error names the missing config file: " << run.status().message();
  EXPECT_OK(Ctr({"containers", "rm", "shim-ctr-1"}));
  // start ran with containerd's flags, got the options from stdin, and its
  // log lines went through the bundle's log FIFO into containerd's log.
  const std::string log = Log();
  EXPECT_NE(log.find("info shim.start: started shim daemon pid"), std::string::npos) << log;
  EXPECT_NE(log.find("for group shim-ctr-1 at unix:///run/containerd/s/"), std::string::npos) << log;
  EXPECT_NE(log.find("(config /etc/capsule/from-ctr.yaml)"), std::string::npos) << log;
}

TEST_F(ShimWithContainerdTest, CriRunPodSandboxFindsTheShimAndPassesConfigPath) {
  auto client = cri::CriClient::Connect(ctrd_->grpc_address(), milliseconds(10000));
  ASSERT_OK(client);
  cri::PodOptions pod;
  pod.name = "shim-cri";
  pod.runtime_handler = "capsule";
  auto id = (*client)->RunPod(pod);
  ASSERT_FALSE(id.ok()) << "the config file is missing: RunPodSandbox must fail";
  EXPECT_NE(id.status().message().find("/etc/capsule/from-cri.yaml"), std::string::npos)
      << "the error names the missing config file: " << id.status().message();
  const std::string log = Log();
  EXPECT_NE(log.find("info shim.start: started shim daemon pid"), std::string::npos) << log;
  EXPECT_NE(log.find("(config /etc/capsule/from-cri.yaml)"), std::string::npos) << log;
  auto pods = (*client)->ListPods();
  ASSERT_OK(pods);
  EXPECT_TRUE(pods->empty()) << "CRI removes the failed sandbox";
}

TEST_F(ShimWithContainerdTest, RestartedContainerdRunsDeleteForADeadShim) {
  // A container whose shim died while containerd was down: its bundle holds
  // the address of a socket nobody serves any more.
  ASSERT_TRUE(Ctr({"containers", "create", "--runtime", CAPSULE_SHIM_BINARY, kBusyboxImage,
                          "dead-1"}).ok());
  const std::string bundle = ctrd_->state() + "/io.containerd.runtime.v2.task/k8s.io/dead-1";
  ASSERT_OK(MkdirAll(bundle));
  const std::string address = shim::launcher::SocketAddress(ctrd_->grpc_address(), "k8s.io", "dead-1",
                                                            shim::launcher::kDefaultSocketDir);
  const std::string socket = *shim::launcher::SocketPathFromAddress(address);
  { auto fd = shim::launcher::ListenUnix(socket); ASSERT_OK(fd); }  // stale
  ASSERT_OK(WriteFile(bundle + "/address", address));

  // containerd reloads shims while it boots: the dial fails, so it runs our
  // `delete` in the bundle and parses the DeleteResponse, before it reports
  // booted.
  ASSERT_OK(ctrd_->Restart());
  const std::string log = Log();
  EXPECT_NE(log.find("cleaning up after shim disconnected"), std::string::npos) << log;
  EXPECT_NE(log.find("cleaning up dead shim"), std::string::npos) << log;
  EXPECT_EQ(log.find("failed to clean up after shim disconnected"), std::string::npos) << log;
  EXPECT_EQ(log.find("cleanup warnings"), std::string::npos) << log;
  struct stat st{};
  EXPECT_NE(::lstat(socket.c_str(), &st), 0) << "delete removes the dead shim's socket";
  EXPECT_FALSE(PathExists(bundle)) << "containerd removes the bundle once delete succeeded";
  EXPECT_OK(Ctr({"containers", "rm", "dead-1"}));
}

}  // namespace
}  // namespace capsule::testing
