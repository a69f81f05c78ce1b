// Faults end to end, through a real containerd 1.6 (CRI and ctr) and real
// QEMU guests booted from capsule-initrd-faults.img, whose agent has the
// test build's fault switch (capsule.fault= on the kernel command line, set
// per pod through the handler's config file): three boots in all.
//   - The agent hangs CreateContainer: CRI StartContainer fails after
//     runtime.agent_timeout_ms with an error naming the RPC, the container
//     and the pod; the pod's VM is stopped (the sandbox goes NOTREADY), and
//     Stop/RemovePodSandbox leave nothing.
//   - RunPodSandbox with a client deadline shorter than the agent's delayed
//     SetupSandbox: containerd gives up, and within a bound no QEMU,
//     virtiofsd, capsule-vsockd, shim, mount or socket of the pod is left.
//   - A task whose StartContainer the agent answers late (ctr run -d):
//     containerd's State (ctr task ls) and Kill answer at once meanwhile.
// One containerd with CRI and a CNI bridge serves all cases; after each,
// the leak check of the other e2e suites.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <iostream>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/cri/cri_client.h"
#include "tests/support/images/test_images.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;
using cri::CriClient;
using std::chrono::milliseconds;
using std::chrono::seconds;
namespace v1 = ::runtime::v1;

constexpr const char* kCriNs = "k8s.io";
constexpr const char* kCtrNs = "fault";
constexpr const char* kHandler = "capsule-fault";
// A cold boot under TCG on a loaded 2-core host, and then some.
constexpr milliseconds kCriTimeout{180000};
// runtime.agent_timeout_ms of the hang case: short, as a test's should be,
// yet far above what an answering agent needs under TCG.
constexpr uint32_t kAgentTimeoutMs = 5000;

milliseconds Since(Clock::time_point t) { return std::chrono::duration_cast<milliseconds>(Clock::now() - t); }

class FaultE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto env = E2eEnv::Create();
    ASSERT_OK(env);
    env_ = new E2eEnv(std::move(*env));
    fault_config_ = new std::string(env_->dir() + "/fault.yaml");
    Status written = env_->WriteFaultConfig(*fault_config_, "", kAgentTimeoutMs);
    ASSERT_OK(written);
    ContainerdOptions o;
    o.path_prepend = {E2eEnv::ShimDir()};
    o.cri.emplace();
    o.cri->cni = true;
    o.cri->runtimes = {{kHandler, kCapsuleRuntimeType, {{"ConfigPath", *fault_config_}}}};
    auto c = ContainerdHarness::Start(o);
    ASSERT_OK(c);
    ctrd_ = c->release();
    for (const char* image : {"busybox", "pause"}) {
      Status imported = ctrd_->ImportImage(TestImageTar(image), kCriNs);
      ASSERT_OK(imported);
    }
    Status imported = ctrd_->ImportImage(TestImageTar("busybox"), kCtrNs);
    ASSERT_OK(imported);
  }
  static void TearDownTestSuite() {
    if (ctrd_ != nullptr && env_ != nullptr) env_->Reap(ctrd_->grpc_address(), {ctrd_->dir()});
    delete ctrd_;
    ctrd_ = nullptr;
    for (const char* h : {"", "/cpu", "/cpuacct", "/cpuset", "/memory", "/devices", "/freezer", "/blkio", "/pids",
                          "/unified", "/net_cls", "/net_prio", "/perf_event", "/hugetlb", "/rdma", "/misc"})
      ::rmdir(("/sys/fs/cgroup" + std::string(h) + CgroupParent()).c_str());
    delete env_;
    env_ = nullptr;
    delete fault_config_;
    fault_config_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(ctrd_, nullptr) << "containerd did not start";
    auto client = CriClient::Connect(ctrd_->grpc_address(), milliseconds(20000));
    ASSERT_OK(client);
    cri_ = std::move(*client);
    cri_->set_call_timeout(kCriTimeout);
    logs_ = ctrd_->dir() + "/pod-logs";
    ASSERT_OK(MkdirAll(logs_));
  }
  void TearDown() override {
    if (ctrd_ == nullptr) return;
    if (HasFailure() && cri_) {  // keep the shared containerd usable for the next case
      for (const auto& id : pods_) {
        (void)cri_->StopPod(id);
        (void)cri_->RemovePod(id);
      }
    }
    auto leaks = LeaksAfterExit(seconds(15));
    for (const char* h : {"/memory", ""}) {
      const std::string parent = "/sys/fs/cgroup" + std::string(h) + CgroupParent();
      for (const auto& e : DirEntries(parent)) {
        struct stat st{};
        if (::stat((parent + "/" + e).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) leaks.push_back("cgroup " + parent + "/" + e);
      }
    }
    EXPECT_TRUE(leaks.empty()) << leaks.size() << " leaks, first: " << leaks.front();
    if (!leaks.empty()) env_->Reap(ctrd_->grpc_address(), {ctrd_->dir()});
    if (HasFailure()) ADD_FAILURE() << "containerd log tail:\n" << ctrd_->LogTail(100000);
  }

  static std::string CgroupParent() { return "/capsule-fault-e2e-" + std::to_string(::getpid()); }

  std::vector<std::string> Leaks() {
    auto leaks = env_->Leaks(ctrd_->grpc_address(), {ctrd_->dir()}, kCriNs, pods_);
    for (auto& l : env_->Leaks(ctrd_->grpc_address(), {ctrd_->dir()}, kCtrNs, ctr_ids_)) leaks.push_back(std::move(l));
    for (auto& l : ctrd_->Leaks()) leaks.push_back(std::move(l));
    std::sort(leaks.begin(), leaks.end());
    leaks.erase(std::unique(leaks.begin(), leaks.end()), leaks.end());
    return leaks;
  }
  // Polls until nothing is left or `bound` passed; what is left then.
  std::vector<std::string> LeaksAfterExit(milliseconds bound) {
    const auto until = Clock::now() + bound;
    std::vector<std::string> leaks = Leaks();
    while (!leaks.empty() && Clock::now() < until) {
      ::usleep(100 * 1000);
      leaks = Leaks();
    }
    return leaks;
  }

  void Arm(const std::string& kernel_params, uint32_t agent_timeout_ms = kAgentTimeoutMs) {
    Status st = env_->WriteFaultConfig(*fault_config_, kernel_params, agent_timeout_ms);
    ASSERT_OK(st);
  }
  v1::PodSandboxConfig Pod(const std::string& name) {
    cri::PodOptions pod;
    pod.name = name;
    pod.network = v1::POD;
    pod.log_directory = logs_;
    pod.runtime_handler = kHandler;
    pod.cgroup_parent = CgroupParent();
    return cri::MakePodConfig(pod);
  }
  Result<std::string> RunPod(const v1::PodSandboxConfig& config) {
    auto id = cri_->RunPod(config, kHandler);
    if (id.ok()) pods_.push_back(*id);
    return id;
  }
  Result<CommandResult> Ctr(const std::vector<std::string>& args, seconds timeout = seconds(60)) {
    std::vector<std::string> argv = {"-n", kCtrNs};
    argv.insert(argv.end(), args.begin(), args.end());
    return ctrd_->Ctr(argv, timeout);
  }

  static inline E2eEnv* env_ = nullptr;
  static inline ContainerdHarness* ctrd_ = nullptr;
  static inline std::string* fault_config_ = nullptr;
  std::unique_ptr<CriClient> cri_;
  std::string logs_;
  std::vector<std::string> pods_;
  std::vector<std::string> ctr_ids_;
};

// Item 1: the agent never answers CreateContainer. CRI's StartContainer
// (containerd's Create of the task) fails once runtime.agent_timeout_ms has
// passed, naming the RPC, the container and the pod; the pod is not left
// half-alive: its VM is stopped and the sandbox reported not ready; Stop
// and RemovePodSandbox then leave nothing.
TEST_F(FaultE2eTest, AHungCreateContainerFailsNamingItAndThePodIsTornDown) {
  // The pod's own container is the guest's pod holder: app's CreateContainer
  // is the pod's first.
  Arm("capsule.fault=CreateContainer:hang");
  const v1::PodSandboxConfig pod = Pod("hung-create");
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  cri::ContainerOptions c;
  c.name = "app";
  c.image = kBusyboxImage;
  c.command = {"sleep", "3600"};
  c.log_path = "app.log";
  auto cid = cri_->CreateContainer(*pod_id, pod, c);  // CRI makes no task yet
  ASSERT_OK(cid);

  const auto t0 = Clock::now();
  Status started = cri_->StartContainer(*cid);
  const milliseconds took = Since(t0);
  std::cout << "StartContainer with a hung CreateContainer failed after " << took.count() << " ms (agent timeout "
            << kAgentTimeoutMs << " ms): " << started.message() << "\n";
  ASSERT_FALSE(started.ok()) << "the container started although its agent never answered";
  for (const std::string& part : {std::string("agent CreateContainer"), "create container " + *cid, *pod_id,
                                  fmt::format("deadline exceeded after {} ms", kAgentTimeoutMs)}) {
    EXPECT_NE(started.message().find(part), std::string::npos) << "'" << part << "' not in: " << started.message();
  }
  EXPECT_GE(took, milliseconds(kAgentTimeoutMs));
  EXPECT_LT(took, milliseconds(kAgentTimeoutMs) + seconds(30)) << "the call is bounded by the agent timeout";

  // The pod goes with its agent: its sandbox is reported exited.
  auto ps = cri_->PodStatus(*pod_id);
  while (ps.ok() && ps->status().state() != v1::SANDBOX_NOTREADY && Since(t0) < seconds(60)) {
    ::usleep(100 * 1000);
    ps = cri_->PodStatus(*pod_id);
  }
  ASSERT_OK(ps);
  EXPECT_EQ(ps->status().state(), v1::SANDBOX_NOTREADY) << "a pod whose agent hangs is left running";
  std::cout << "the pod was reported not ready " << Since(t0).count() << " ms after StartContainer began\n";
  EXPECT_NE(ctrd_->LogTail(8 << 20).find("stopping VM"), std::string::npos) << "the shim did not say why";

  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
  const auto t1 = Clock::now();
  EXPECT_TRUE(LeaksAfterExit(seconds(15)).empty());
  std::cout << "nothing of the pod left " << Since(t1).count() << " ms after RemovePodSandbox\n";
}

// Item 2: RunPodSandbox's client deadline passes while the agent delays
// SetupSandbox (or, on a slow host, while the VM still boots): containerd
// gives up on the task's Create and forgets the pod, and the shim undoes
// the pod and exits: no QEMU, virtiofsd, capsule-vsockd, shim, mount, VM
// dir or socket is left within the bound.
TEST_F(FaultE2eTest, ARunPodSandboxContainerdGaveUpOnLeavesNoVmAndNoShim) {
  constexpr milliseconds kClientDeadline{15000};
  Arm("capsule.fault=SetupSandbox:delay=60000", 30000);
  cri_->set_call_timeout(kClientDeadline);
  const auto t0 = Clock::now();
  auto pod_id = RunPod(Pod("given-up"));
  const auto gave_up = Clock::now();
  cri_->set_call_timeout(kCriTimeout);
  ASSERT_FALSE(pod_id.ok()) << "the pod started although SetupSandbox was held for 60 s";
  EXPECT_EQ(pod_id.status().code(), Code::kDeadlineExceeded) << pod_id.status().ToString();
  EXPECT_GE(Since(t0), kClientDeadline);
  const std::string log = ctrd_->LogTail(8 << 20);
  std::cout << "containerd gave up on the Create "
            << (log.find("connect to the agent: cancelled") != std::string::npos ? "while the VM booted"
                                                                                   : "during SetupSandbox")
            << "\n";

  const auto leaks = LeaksAfterExit(seconds(30));
  const milliseconds clean = Since(gave_up);
  EXPECT_TRUE(leaks.empty()) << leaks.size() << " leaks " << clean.count() << " ms after the deadline, first: "
                             << leaks.front();
  std::cout << "nothing of the forgotten pod left " << clean.count() << " ms after the client's deadline\n";
  auto pods = cri_->ListPods();
  ASSERT_OK(pods);
  EXPECT_TRUE(pods->empty()) << "CRI still lists " << pods->size() << " pod(s)";
  // containerd's Delete, right after its client gave up, usually comes a
  // moment before the shim's own copy of the deadline: either cancels.
  const std::string after = ctrd_->LogTail(8 << 20);
  const bool by_deadline = after.find("containerd's deadline for it passed") != std::string::npos;
  const bool by_delete = after.find("containerd deleted the task while it was being created") != std::string::npos;
  EXPECT_TRUE(by_deadline || by_delete) << "the shim did not undo the Create containerd gave up on";
  std::cout << "the creation was cancelled by " << (by_deadline ? "its deadline" : "containerd's Delete") << "\n";
}

// Item 2: StartContainer answered 10 s late. containerd's State (ctr task
// ls) and Kill reach the shim meanwhile and answer at once; the task then
// ends and is removed cleanly.
TEST_F(FaultE2eTest, StateAndKillAnswerWhileAStartIsSlow) {
  constexpr int kDelayMs = 10000;
  Arm(fmt::format("capsule.fault=StartContainer:delay={}:once", kDelayMs), 30000);
  const std::string id = "slow-start";
  ctr_ids_.push_back(id);
  auto run = std::async(std::launch::async, [&] {
    return Ctr({"run", "-d", "--runtime", kCapsuleRuntimeType, "--runtime-config-path", *fault_config_,
                kBusyboxImage, id, "sleep", "3600"},
               seconds(240));
  });
  // Created (the VM booted, the agent made the container); Start held.
  Result<CommandResult> ls = Internal("not listed yet");
  const auto until = Clock::now() + seconds(180);
  while (Clock::now() < until && run.wait_for(milliseconds(0)) != std::future_status::ready) {
    ls = Ctr({"task", "ls"});
    if (ls.ok() && ls->out.find(id) != std::string::npos && ls->out.find("CREATED") != std::string::npos) break;
    ::usleep(200 * 1000);
  }
  ASSERT_NE(run.wait_for(milliseconds(0)), std::future_status::ready) << "ctr run ended before its start was held";
  ASSERT_TRUE(ls.ok() && ls->out.find("CREATED") != std::string::npos) << (ls.ok() ? ls->out : ls.status().ToString());
  ::usleep(500 * 1000);  // well inside the held StartContainer

  auto t0 = Clock::now();
  ls = Ctr({"task", "ls"});
  const milliseconds state_took = Since(t0);
  ASSERT_TRUE(ls.ok() && ls->ok()) << (ls.ok() ? ls->err : ls.status().ToString());
  EXPECT_NE(ls->out.find("CREATED"), std::string::npos) << ls->out;
  t0 = Clock::now();
  auto kill = Ctr({"task", "kill", "-s", "SIGKILL", id});
  const milliseconds kill_took = Since(t0);
  ASSERT_OK(kill);
  EXPECT_TRUE(kill->ok()) << kill->err;
  EXPECT_NE(run.wait_for(milliseconds(0)), std::future_status::ready) << "the start was no longer in flight";
  std::cout << "during a start held " << kDelayMs << " ms: State answered in " << state_took.count()
            << " ms, Kill in " << kill_took.count() << " ms\n";
  EXPECT_LT(state_took, milliseconds(3000)) << "State waited behind the slow start";
  EXPECT_LT(kill_took, milliseconds(3000)) << "Kill waited behind the slow start";

  ASSERT_EQ(run.wait_for(seconds(60)), std::future_status::ready) << "ctr run did not end after the held start";
  auto ran = run.get();
  ASSERT_OK(ran);
  std::cout << "ctr run -d ended with " << ran->exit_code << ": " << ran->err << "\n";
  // Killed before it ran: stopped either way (a failed start or the kill).
  Result<CommandResult> after = Internal("not asked");
  for (int i = 0; i < 100; ++i) {
    after = Ctr({"task", "ls"});
    if (after.ok() && after->out.find("STOPPED") != std::string::npos) break;
    ::usleep(100 * 1000);
  }
  ASSERT_OK(after);
  EXPECT_NE(after->out.find("STOPPED"), std::string::npos) << after->out;
  auto rm = Ctr({"task", "rm", id});
  ASSERT_OK(rm);
  EXPECT_TRUE(rm->ok()) << rm->err;
  auto crm = Ctr({"containers", "rm", id});
  ASSERT_OK(crm);
  EXPECT_TRUE(crm->ok()) << crm->err;
}

}  // namespace
}  // namespace capsule::testing
