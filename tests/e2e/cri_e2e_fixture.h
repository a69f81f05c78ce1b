// The fixture of the CRI end-to-end suites: a private containerd 1.6 with
// CRI for this host and a CNI bridge of its own, the capsule runtime handler
// on the built shim, the busybox and pause images imported, a CRI client,
// and after each test the leak check (no process of ours, shim included, no
// mount, VM dir, socket, pod netns or bridge port left).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <signal.h>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/containerd_leaks.h"
#include "tests/support/images/test_images.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {

using cri::ContainerOptions;
using cri::CriClient;
using cri::PodOptions;
namespace v1 = ::runtime::v1;
using std::chrono::milliseconds;

inline constexpr const char* kCriNs = "k8s.io";
inline constexpr uint16_t kHttpPort = 8080;

// One HTTP/1.0 GET to ip:port; the whole response, or why not.
inline Result<std::string> HttpGet(const std::string& ip, uint16_t port, std::chrono::milliseconds timeout,
                                   const std::string& path = "/") {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return ErrnoStatus("socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) return InvalidArgument("not an IPv4 address: " + ip);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS)
    return ErrnoStatus("connect " + ip);
  pollfd p{fd.get(), POLLOUT, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return DeadlineExceeded("connect " + ip + ": no answer");
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return Unavailable(fmt::format("connect {}:{}: {}", ip, port, std::strerror(err)));
  const std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
  if (::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
    return ErrnoStatus("send to " + ip);
  std::string out;
  for (;;) {
    p = {fd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return DeadlineExceeded("read from " + ip);
    char buf[4096];
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0) return ErrnoStatus("recv from " + ip);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

class CriE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto env = E2eEnv::Create(boot_nic_);
    ASSERT_OK(env);
    env_.emplace(std::move(*env));
    ContainerdOptions o;
    o.path_prepend = {E2eEnv::ShimDir()};
    o.cri.emplace();
    o.cri->cni = true;
    o.cri->runtimes = {{"capsule", kCapsuleRuntimeType, {{"ConfigPath", env_->config_path()}}}};
    auto c = ContainerdHarness::Start(o);
    ASSERT_OK(c);
    ctrd_ = std::move(*c);
    for (const char* image : {"busybox", "pause"}) {
      Status imported = ctrd_->ImportImage(TestImageTar(image), kCriNs);
      ASSERT_OK(imported);
    }
    Connect();
    logs_ = ctrd_->dir() + "/pod-logs";
    ASSERT_OK(MkdirAll(logs_));
  }
  void TearDown() override {
    cri_.reset();
    if (!ctrd_) return;
    auto leaks = LeaksAfterExit();
    // The pods' leaf cgroups went with their VMs.
    for (const char* h : {"/memory", ""}) {
      const std::string parent = "/sys/fs/cgroup" + std::string(h) + cgroup_parent_;
      for (const auto& e : DirEntries(parent)) {
        struct stat st{};
        if (::stat((parent + "/" + e).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) leaks.push_back("cgroup " + parent + "/" + e);
      }
    }
    RemoveCgroupParent();
    EXPECT_TRUE(leaks.empty()) << leaks.size() << " leaks, first: " << leaks.front();
    if (!leaks.empty()) env_->Reap(ctrd_->grpc_address(), {ctrd_->dir()});
    if (HasFailure()) ADD_FAILURE() << "containerd log tail:\n" << ctrd_->LogTail(200000);
  }
  std::vector<std::string> Leaks() {
    auto leaks = env_->Leaks(ctrd_->grpc_address(), {ctrd_->dir()}, kCriNs, pods_);
    for (auto& l : ctrd_->Leaks()) leaks.push_back(std::move(l));
    return leaks;
  }
  // A shim exits on its own after containerd's last Shutdown (its VM goes
  // first); give that a bounded while, so that a shim that outlives its pod
  // is a leak and not a race.
  std::vector<std::string> LeaksAfterExit() {
    std::vector<std::string> leaks = Leaks();
    for (int i = 0; i < 150 && !leaks.empty(); ++i) {
      ::usleep(100 * 1000);
      leaks = Leaks();
    }
    return leaks;
  }
  // The pod's shim: the capsule-shimd daemon whose -id is the
  // pod's sandbox id.
  pid_t ShimOf(const std::string& pod_id) {
    for (const auto& [pid, cmd] : E2eEnv::Processes({"capsule-shimd"})) {
      if (cmd.find("-id " + pod_id) != std::string::npos && cmd.find(ctrd_->grpc_address()) != std::string::npos)
        return pid;
    }
    return 0;
  }
  void Connect() {
    auto client = CriClient::Connect(ctrd_->grpc_address(), milliseconds(20000));
    ASSERT_OK(client);
    cri_ = std::move(*client);
    cri_->set_call_timeout(milliseconds(180000));  // a cold boot under TCG
  }
  v1::PodSandboxConfig Pod(const std::string& name, v1::NamespaceMode network) {
    PodOptions pod;
    pod.name = name;
    pod.network = network;
    pod.log_directory = logs_;
    pod.runtime_handler = "capsule";
    pod.cgroup_parent = cgroup_parent_;
    return cri::MakePodConfig(pod);
  }
  // The cgroup (cgroupfs path) every pod of the test gets as its parent,
  // as the kubelet gives one per pod; removed after the test.
  const std::string cgroup_parent_ = "/capsule-e2e-" + std::to_string(::getpid());
  // The VMM of a pod (its task pid, which CRI reads its netns from) is in
  // the pod sandbox's cgroup: `<parent>/<sandbox id>` in each hierarchy.
  // The pod's VMM: containerd's task pid for the sandbox (verbose status).
  pid_t VmmOf(const std::string& pod_id) {
    auto status = cri_->PodStatus(pod_id, /*verbose=*/true);
    if (!status.ok()) return 0;
    const std::string info = status->info().count("info") ? status->info().at("info") : "";
    const size_t at = info.find("\"pid\":");
    return at == std::string::npos ? 0 : static_cast<pid_t>(std::atol(info.c_str() + at + 6));
  }
  void ExpectVmmInPodCgroup(const std::string& pod_id) {
    const pid_t pid = VmmOf(pod_id);
    ASSERT_GT(pid, 0) << "no VMM pid in the verbose status of pod " << pod_id;
    auto cgroups = ReadFile("/proc/" + std::to_string(pid) + "/cgroup");
    ASSERT_OK(cgroups);
    const std::string want = cgroup_parent_ + "/" + pod_id;
    EXPECT_TRUE(cgroups->find(":memory:" + want + "\n") != std::string::npos ||
                cgroups->find("0::" + want + "\n") != std::string::npos)
        << "VMM pid " << pid << " is not in " << want << ":\n" << *cgroups;
  }
  void RemoveCgroupParent() {
    for (const char* h : {"", "/cpu", "/cpuacct", "/cpuset", "/memory", "/devices", "/freezer", "/blkio", "/pids",
                          "/unified", "/net_cls", "/net_prio", "/perf_event", "/hugetlb", "/rdma", "/misc"})
      ::rmdir(("/sys/fs/cgroup" + std::string(h) + cgroup_parent_).c_str());
  }
  Result<std::string> RunPod(const v1::PodSandboxConfig& config) {
    auto id = cri_->RunPod(config, "capsule");
    if (id.ok()) pods_.push_back(*id);
    return id;
  }
  Result<std::string> StartContainer(const std::string& pod_id, const v1::PodSandboxConfig& pod,
                                     const std::string& name, const std::vector<std::string>& command) {
    ContainerOptions c;
    c.name = name;
    c.image = kBusyboxImage;
    c.command = command;
    c.log_path = name + ".log";
    ASSIGN_OR_RETURN(std::string id, cri_->CreateContainer(pod_id, pod, c));
    RETURN_IF_ERROR(cri_->StartContainer(id));
    return id;
  }

  bool boot_nic_ = true;  // guest.boot_nic of the test's config
  std::optional<E2eEnv> env_;
  std::unique_ptr<ContainerdHarness> ctrd_;
  std::unique_ptr<CriClient> cri_;
  std::string logs_;
  std::vector<std::string> pods_;
};

// The same with a capsule-poold serving the test's config.
class CriPoolFixture : public CriE2eTest {
 protected:
  void StartPool() {
    auto d = PoolDaemonProcess::Start(env_->config_path(), env_->pool_socket());
    ASSERT_OK(d);
    pool_ = std::move(*d);
  }
  // Stops the daemon (it drains) and removes the pool's own cgroup
  // (pool.cgroup of E2eEnv's config); returns that cgroup's path if the
  // daemon had left it, else "".
  std::string StopPool() {
    if (pool_) pool_->Stop();
    if (!env_) return "";
    const std::string cgroup = "/sys/fs/cgroup/memory/capsule-pool-" + env_->dir().substr(env_->dir().rfind('/') + 1);
    const bool left = PathExists(cgroup);
    ::rmdir(cgroup.c_str());
    return left ? cgroup : "";
  }
  std::unique_ptr<PoolDaemonProcess> pool_;
};

}  // namespace capsule::testing
