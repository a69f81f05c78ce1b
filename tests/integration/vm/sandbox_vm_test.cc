// SandboxVm with every real part: QEMU (TCG here), capsule-vsockd's
// vhost-user vsock, virtiofsd, the built guest image with capsule-agent as
// PID 1. One VM is booted per vsock back end (a TCG cold boot costs
// 10-20 s); the cases run in order on it: agent over vsock, the virtio-fs
// share (a file and a late bind mount), a dial to a dead port, detach and
// adopt, a flooded console log, stop with nothing left. The failure cases
// boot no guest to the end.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <future>

#include "runtime/agentclient/grpc_agent_client.h"
#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"
#include "runtime/vm/log_guard.h"
#include "runtime/vm/sandbox_vm.h"
#include "runtime/vsock/vsock_backend.h"
#include "runtime/wire/agent_auth.h"
#include "runtime/wire/guest_abi.h"
#include "tests/integration/vm/vm_test_env.h"
#include "tests/support/status_matchers.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using testing::TestEnv;

constexpr milliseconds kGraceful{10000};

void ExpectNothingLeft(const TestEnv& env) {
  EXPECT_TRUE(env.Leftovers().empty()) << ::testing::PrintToString(env.Leftovers());
  EXPECT_EQ(testing::MemfdsHeldByUs(), "");
}

Result<std::string> ReadInGuest(SandboxVm& vm, const std::string& path) {
  ASSIGN_OR_RETURN(agentclient::AgentClient * agent, vm.agent());
  agent::v1::ReadGuestFileRequest req;
  req.set_path(path);
  req.set_max_bytes(4096);
  ASSIGN_OR_RETURN(auto resp, agent->ReadGuestFile(req));
  return resp.data();
}

// ---- one booted VM per vsock back end, shared by the cases below, in order ----

// The two capsule-vsockd back ends: vhost-user-vsock, and vsock packets on a
// virtio-serial port (the dense device set's channel, served in the guest
// by the agent's own muxer). Every case runs on each.
struct VhostUserVsock {
  static constexpr config::VsockBackendKind kBackend = config::VsockBackendKind::kVhostUser;
  static constexpr const char* kSocket = vsock::kVhostUserSocketName;
  static constexpr const char* kQemuDevice = "vhost-user-vsock-pci";
};
struct SerialVsock {
  static constexpr config::VsockBackendKind kBackend = config::VsockBackendKind::kSerial;
  static constexpr const char* kSocket = vsock::kSerialSocketName;
  static constexpr const char* kQemuDevice = "virtserialport";
};
struct BackendName {
  template <typename T>
  static std::string GetName(int) {
    return std::string(config::VsockBackendName(T::kBackend)) == "serial" ? "Serial" : "VhostUser";
  }
};

template <typename Backend>
class BootedVmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto env = TestEnv::Create();
    ASSERT_OK(env);
    env_ = std::move(*env);
    config_ = env_->config();
    config_.vsock.backend = Backend::kBackend;
    SandboxVmSpec spec;
    spec.id = "it-shared";
    auto vm = SandboxVm::Boot(config_, spec);
    ASSERT_OK(vm);
    vm_ = std::move(*vm);
  }
  static void TearDownTestSuite() {
    if (vm_) (void)vm_->Stop(milliseconds(0));
    vm_.reset();
    env_.reset();
  }
  void SetUp() override {
    if (!vm_) GTEST_SKIP() << "the shared VM did not boot";
  }

  static inline std::unique_ptr<TestEnv> env_;
  static inline config::Config config_;
  static inline SandboxVmPtr vm_;
};
using Backends = ::testing::Types<VhostUserVsock, SerialVsock>;
TYPED_TEST_SUITE(BootedVmTest, Backends, BackendName);

TYPED_TEST(BootedVmTest, AgentAnswersCheckAndVersionThroughCapsuleVsockd) {
  EXPECT_EQ(TestFixture::vm_->state_dir(), TestFixture::env_->state_dir() + "/vm/it-shared");
  // capsule-vsockd carries it: its sockets are there, and QEMU has the device.
  EXPECT_TRUE(PathExists(TestFixture::vm_->state_dir() + "/" + TypeParam::kSocket));
  EXPECT_TRUE(PathExists(TestFixture::vm_->state_dir() + "/" + vsock::kHybridSocketName));
  auto qemu_cmdline = ReadFile("/proc/" + std::to_string(TestFixture::vm_->vmm_pid()) + "/cmdline");
  ASSERT_OK(qemu_cmdline);
  EXPECT_NE(qemu_cmdline->find(TypeParam::kQemuDevice), std::string::npos);
  auto agent = TestFixture::vm_->agent();
  ASSERT_OK(agent);
  auto check = (*agent)->Check(milliseconds(10000));
  ASSERT_OK(check);
  EXPECT_EQ(check->status(), agent::v1::CheckResponse::SERVING);
  auto version = (*agent)->Version();
  ASSERT_OK(version);
  EXPECT_EQ(version->api_version(), guest_abi::kAgentApiVersion);
  EXPECT_FALSE(version->kernel_release().empty());
  EXPECT_GT(version->ready_monotonic_us(), 0u);

  const BootTimings& t = TestFixture::vm_->timings();
  EXPECT_GT(t.prepare_ms, 0);
  EXPECT_GT(t.vmm_start_ms, 0);
  EXPECT_GT(t.agent_ready_ms, 0);
  EXPECT_GE(t.total_ms, t.prepare_ms + t.vmm_start_ms + t.agent_ready_ms - 1);
  EXPECT_GT(TestFixture::vm_->vmm_pid(), 0);
}

// The guest's boot, up to the agent's "ready" line, logs no warning or
// error: a step that failed quietly (the module allowlist that could not be
// written, so guest.modules_allow went unused) shows here.
TYPED_TEST(BootedVmTest, TheGuestBootsWithoutAWarning) {
  const std::string console = hypervisor::VmPaths(TestFixture::vm_->state_dir()).console_log();
  auto text = ReadFile(console);
  ASSERT_OK(text);
  const size_t ready = text->find("capsule-agent ready");
  ASSERT_NE(ready, std::string::npos) << "no ready line in " << console;
  const std::string boot = text->substr(0, text->find('\n', ready));
  for (const char* level : {"Z warn ", "Z error "})
    EXPECT_EQ(boot.find(level), std::string::npos) << boot.substr(boot.find(level), 300);
}

// A VM without a sandbox rehearses a container's whole life (what the pool
// has each VM do before offering it), again and again, and nothing of it
// stays in the guest: no mount, no rootfs dir, no cgroup, no process. Asked
// for the blk storage driver, it loads that driver's modules.
TYPED_TEST(BootedVmTest, ARehearsalRunsAContainerAndLeavesNothing) {
  auto agent = TestFixture::vm_->agent();
  ASSERT_OK(agent);
  agent::v1::RehearseRequest req;
  for (int i = 0; i < 2; ++i) {
    auto r = (*agent)->Rehearse(req, milliseconds(30000));
    ASSERT_OK(r);
    EXPECT_GT(r->elapsed_ms(), 0u);
    req.add_storage_drivers("blk");  // the second one, as for a dense VM
  }
  // A dense VM's rehearsal loaded what its containers' erofs disks need.
  auto modules = ReadInGuest(*TestFixture::vm_, "/proc/modules");
  ASSERT_OK(modules);
  EXPECT_NE(modules->find("erofs "), std::string::npos) << *modules;
  auto mounts = ReadInGuest(*TestFixture::vm_, "/proc/self/mountinfo");
  ASSERT_OK(mounts);
  EXPECT_EQ(mounts->find("rehearsal"), std::string::npos) << *mounts;
  EXPECT_EQ(ReadInGuest(*TestFixture::vm_, "/run/capsule/rehearsal/init").status().code(), Code::kNotFound);
  auto cgroups = ReadInGuest(*TestFixture::vm_, "/sys/fs/cgroup/capsule/capsule-rehearsal/cgroup.procs");
  EXPECT_EQ(cgroups.status().code(), Code::kNotFound) << "the rehearsal's cgroup stayed";
  // Still a VM a pod can use: the agent answers.
  EXPECT_TRUE((*agent)->Check(milliseconds(10000)).ok());
}

// The freshness a claim applies, applied by the rehearsal too when it
// carries it (the pool sends the host's clock and entropy): the clock is
// the one sent, the RNG reseeded once more. (An hour ahead, to tell it
// from a clock that was right already; put back after.)
TYPED_TEST(BootedVmTest, ARehearsalAppliesTheClockAndRandomnessItCarries) {
  auto agent = TestFixture::vm_->agent();
  ASSERT_OK(agent);
  auto host_ns = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  agent::v1::AddRandomnessRequest seed;
  seed.set_data(std::string(64, 's'));
  auto before = (*agent)->AddRandomness(seed);
  ASSERT_OK(before);
  constexpr int64_t kHour = 3600'000'000'000;
  agent::v1::RehearseRequest req;
  const int64_t ahead = host_ns() + kHour;
  req.mutable_time()->set_seconds(ahead / 1'000'000'000);
  req.mutable_time()->set_nanos(ahead % 1'000'000'000);
  req.mutable_randomness()->set_data(std::string(512, 'r'));
  ASSERT_OK((*agent)->Rehearse(req, milliseconds(30000)));
  auto version = (*agent)->Version();
  ASSERT_OK(version);
  EXPECT_LT(std::llabs(version->wall_clock_unix_ns() - (host_ns() + kHour)), 5'000'000'000ll)
      << "the guest clock is not the one the rehearsal carried";
  auto after = (*agent)->AddRandomness(seed);
  ASSERT_OK(after);
  EXPECT_EQ(after->reseeds(), before->reseeds() + 2) << "the rehearsal did not reseed the RNG";
  // Back to the host's clock for the next case on this VM.
  agent::v1::SetGuestTimeRequest now;
  const int64_t ns = host_ns();
  now.set_seconds(ns / 1'000'000'000);
  now.set_nanos(ns % 1'000'000'000);
  ASSERT_OK((*agent)->SetGuestTime(now));
}

// The base kernel command line reached the guest kernel: its RCU waits are
// expedited (a container's cgroup join and namespace changes wait for one).
TYPED_TEST(BootedVmTest, TheGuestKernelExpeditesItsRcuWaits) {
  auto expedited = ReadInGuest(*TestFixture::vm_, "/sys/kernel/rcu_expedited");
  ASSERT_OK(expedited);
  EXPECT_EQ(*expedited, "1\n");
}

// The boot NIC's part: it plays a pod's take-over (MAC, address, link up,
// default route) and is put back as it was but up, with IPv6 off (no
// link-local address from the template's MAC), so the claim still finds it
// by its MAC and changes that live; a MAC no NIC has fails, naming it.
TYPED_TEST(BootedVmTest, ARehearsalOfTheBootNicPutsItBackAsItWasButUp) {
  const auto nic = TestFixture::vm_->boot_nic();
  ASSERT_TRUE(nic.has_value()) << "guest.boot_nic is on by default";
  auto agent = TestFixture::vm_->agent();
  ASSERT_OK(agent);
  auto links_before = (*agent)->ListInterfaces();
  auto routes_before = (*agent)->ListRoutes();
  ASSERT_TRUE(links_before.ok() && routes_before.ok());
  agent::v1::RehearseRequest req;
  req.set_boot_nic_mac(nic->mac);
  auto r = (*agent)->Rehearse(req, milliseconds(30000));
  ASSERT_OK(r);
  auto links_after = (*agent)->ListInterfaces();
  auto routes_after = (*agent)->ListRoutes();
  ASSERT_TRUE(links_after.ok() && routes_after.ok());
  agent::v1::Interfaces expected = *links_before;
  for (auto& i : *expected.mutable_interfaces())
    if (i.hw_addr() == nic->mac) i.set_up(true);
  EXPECT_EQ(links_after->DebugString(), expected.DebugString());
  EXPECT_EQ(routes_after->DebugString(), routes_before->DebugString());
  bool found = false;
  for (const auto& i : links_after->interfaces()) found = found || i.hw_addr() == nic->mac;
  EXPECT_TRUE(found) << "no NIC has " << nic->mac << " any more:\n" << links_after->DebugString();
  auto console = ReadFile(hypervisor::VmPaths(TestFixture::vm_->state_dir()).console_log());
  ASSERT_OK(console);
  EXPECT_NE(console->find("take-over played, MAC set to 02:ca:95:00:00:01"), std::string::npos)
      << "the take-over was not played";

  req.set_boot_nic_mac("02:00:00:00:00:99");
  auto missing = (*agent)->Rehearse(req, milliseconds(30000));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("02:00:00:00:00:99"), std::string::npos) << missing.status().ToString();
  EXPECT_TRUE((*agent)->Check(milliseconds(10000)).ok());
}

// A storage mounted ahead of the pod (the pool's rehearsal does it with the
// VM's shared fs) is mounted once, however often it is asked for, and the
// sandbox naming it takes it over instead of mounting it again; the
// sandbox's end unmounts it.
TYPED_TEST(BootedVmTest, AStorageMountedAheadIsTakenOverByTheSandbox) {
  auto agent = TestFixture::vm_->agent();
  ASSERT_OK(agent);
  agent::v1::Storage tmpfs;
  tmpfs.set_driver("tmpfs");
  tmpfs.set_source("ahead");
  tmpfs.set_fstype("tmpfs");
  tmpfs.add_options("size=1m");
  tmpfs.set_mount_point("/run/capsule-ahead-test");
  auto count = [&]() -> int {
    auto mounts = ReadInGuest(*TestFixture::vm_, "/proc/self/mountinfo");
    if (!mounts.ok()) return -1;
    int n = 0;
    for (size_t at = mounts->find(" /run/capsule-ahead-test "); at != std::string::npos;
         at = mounts->find(" /run/capsule-ahead-test ", at + 1))
      ++n;
    return n;
  };
  agent::v1::RehearseRequest req;
  *req.add_storages() = tmpfs;
  ASSERT_OK((*agent)->Rehearse(req, milliseconds(30000)));
  EXPECT_EQ(count(), 1);
  ASSERT_OK((*agent)->Rehearse(req, milliseconds(30000)));
  EXPECT_EQ(count(), 1) << "mounted ahead twice";

  agent::v1::CreateSandboxRequest sb;
  sb.set_sandbox_id("pod-ahead");
  *sb.add_storages() = tmpfs;
  ASSERT_OK((*agent)->CreateSandbox(sb));
  EXPECT_EQ(count(), 1) << "the sandbox mounted it again";
  // Ahead of the pod only: with a sandbox there, the agent refuses.
  auto late = (*agent)->Rehearse(req, milliseconds(30000));
  EXPECT_EQ(late.status().code(), Code::kFailedPrecondition) << late.status().ToString();
  ASSERT_OK((*agent)->DestroySandbox(agent::v1::DestroySandboxRequest()));
  EXPECT_EQ(count(), 0) << "the sandbox's end left it mounted";
}

TYPED_TEST(BootedVmTest, FilesAndLateBindMountsUnderTheShareReachTheGuest) {
  auto agent = TestFixture::vm_->agent();
  ASSERT_OK(agent);
  agent::v1::CreateSandboxRequest req;
  req.set_sandbox_id("pod-it");
  *req.add_storages() = TestFixture::vm_->SharedFsStorage();
  Status created = (*agent)->CreateSandbox(req);
  ASSERT_OK(created);

  // A file written on the host after the guest mounted the share.
  ASSERT_OK(WriteFile(TestFixture::vm_->HostSharedPath("hello.txt"), "hello from the host\n"));
  auto hello = ReadInGuest(*TestFixture::vm_, TestFixture::vm_->GuestSharedPath("hello.txt"));
  ASSERT_OK(hello);
  EXPECT_EQ(*hello, "hello from the host\n");

  // A directory bind-mounted there afterwards, as container rootfs arrive.
  std::string src = TestFixture::env_->root() + "/rootfs-src";
  ASSERT_OK(MkdirAll(src + "/etc"));
  ASSERT_OK(WriteFile(src + "/etc/marker", "rootfs via bind mount\n"));
  std::string target = TestFixture::vm_->HostSharedPath("c1/rootfs");
  ASSERT_OK(MkdirAll(target));
  ASSERT_EQ(::mount(src.c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
  auto marker = ReadInGuest(*TestFixture::vm_, TestFixture::vm_->GuestSharedPath("c1/rootfs/etc/marker"));
  EXPECT_EQ(::umount2(target.c_str(), MNT_DETACH), 0);
  ASSERT_OK(marker);
  EXPECT_EQ(*marker, "rootfs via bind mount\n");
}

TYPED_TEST(BootedVmTest, DialToAGuestPortNobodyListensOnIsUnavailableAndHarmless) {
  auto t0 = Clock::now();
  auto fd = TestFixture::vm_->DialGuest(4242, milliseconds(5000));
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Code::kUnavailable) << fd.status().ToString();
  EXPECT_NE(fd.status().message().find("4242"), std::string::npos) << fd.status().message();
  EXPECT_LT(Clock::now() - t0, milliseconds(5000)) << "a refused port must not wait for the timeout";
  auto agent = TestFixture::vm_->agent();
  ASSERT_OK(agent);
  EXPECT_TRUE((*agent)->Check(milliseconds(10000)).ok());
}

// Kernel vhost-vsock lets any local user dial a guest's CID, so the agent
// serves only a stream that proves the VM's token first. The token reached
// the guest by fw_cfg and is nowhere on QEMU's command line (any user reads
// that); it is in vm.json, in the VM's root-only dir, for adoption.
TYPED_TEST(BootedVmTest, TheAgentServesOnlyAStreamThatProvesTheVmsToken) {
  auto record_text = ReadFile(TestFixture::vm_->state_dir() + "/vm.json");
  ASSERT_OK(record_text);
  auto record = hypervisor::VmRecordFromJson(*record_text, "vm.json");
  ASSERT_OK(record);
  const std::string token = record->spec.agent_token;
  ASSERT_TRUE(agent_auth::IsWellFormedToken(token)) << "'" << token << "'";
  auto cmdline = ReadFile("/proc/" + std::to_string(TestFixture::vm_->vmm_pid()) + "/cmdline");
  ASSERT_OK(cmdline);
  EXPECT_EQ(cmdline->find(token), std::string::npos) << "the token is on QEMU's command line";
  EXPECT_NE(cmdline->find(std::string(guest_abi::kAgentTokenFwCfgName)), std::string::npos);
  struct stat st{};
  ASSERT_EQ(::stat(TestFixture::vm_->state_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << "the VM dir holding vm.json is open to others";

  auto wrong = TestFixture::vm_->DialGuest(guest_abi::kAgentVsockPort, milliseconds(5000));
  ASSERT_OK(wrong);
  Status denied = agent_auth::Prove(wrong->get(), *agent_auth::NewToken(), milliseconds(10000));
  EXPECT_EQ(denied.code(), Code::kPermissionDenied) << denied.ToString();

  auto right = TestFixture::vm_->DialGuest(guest_abi::kAgentVsockPort, milliseconds(5000));
  ASSERT_OK(right);
  Status proved = agent_auth::Prove(right->get(), token, milliseconds(10000));
  EXPECT_OK(proved);
  auto client = agentclient::NewGrpcAgentClient(std::move(*right), {});
  auto check = client->Check(milliseconds(10000));
  ASSERT_OK(check);
  EXPECT_EQ(check->status(), agent::v1::CheckResponse::SERVING);
  client->Close();
}

TYPED_TEST(BootedVmTest, DetachThenAdoptFromANewObject) {
  pid_t qemu = TestFixture::vm_->vmm_pid();
  std::string dir = TestFixture::vm_->state_dir();
  ASSERT_OK(TestFixture::vm_->Detach());
  EXPECT_EQ(TestFixture::vm_->agent().status().code(), Code::kFailedPrecondition);
  TestFixture::vm_.reset();  // a detached VM survives its object
  EXPECT_FALSE(testing::ProcessesMentioning(dir).empty());

  auto adopted = SandboxVm::Adopt(TestFixture::config_, dir);
  ASSERT_OK(adopted);
  TestFixture::vm_ = std::move(*adopted);
  EXPECT_EQ(TestFixture::vm_->id(), "it-shared");
  EXPECT_EQ(TestFixture::vm_->vmm_pid(), qemu);
  auto agent = TestFixture::vm_->agent();
  ASSERT_OK(agent);
  EXPECT_TRUE((*agent)->Check(milliseconds(10000)).ok());
  // Same guest: the file written before the hand-over is still served.
  auto hello = ReadInGuest(*TestFixture::vm_, TestFixture::vm_->GuestSharedPath("hello.txt"));
  ASSERT_OK(hello);
  EXPECT_EQ(*hello, "hello from the host\n");
}

// What a guest that floods its serial console leaves on the host's tmpfs:
// console.log is cut back to its bound within about a second, and QEMU
// (chardev append=on) goes on writing at the new end, not its old offset.
TYPED_TEST(BootedVmTest, AFloodedConsoleLogIsCutToItsBoundAndQemuGoesOnAppending) {
  const std::string console = hypervisor::VmPaths(TestFixture::vm_->state_dir()).console_log();
  {
    UniqueFd fd(::open(console.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    ASSERT_TRUE(fd) << console;
    const std::string flood = std::string(1023, 'f') + "\n";
    for (int i = 0; i < 3 * 1024; ++i) ASSERT_EQ(::write(fd.get(), flood.data(), flood.size()), 1024);
  }
  const LogGuardOptions bound;
  auto deadline = Clock::now() + milliseconds(10000);
  while (FileSize(console).value_or(0) > bound.max_bytes && Clock::now() < deadline) ::usleep(50 * 1000);
  ASSERT_LE(FileSize(console).value_or(0), bound.max_bytes) << "console.log was not trimmed";
  // A failing RPC makes the agent log a warning on its console.
  const std::string probe = "/capsule-console-probe-" + std::to_string(::getpid());
  EXPECT_FALSE(ReadInGuest(*TestFixture::vm_, probe).ok());
  std::string text;
  deadline = Clock::now() + milliseconds(10000);
  while (Clock::now() < deadline) {
    text = ReadFile(console).value_or("");
    if (text.find(probe) != std::string::npos) break;
    ::usleep(50 * 1000);
  }
  ASSERT_NE(text.find(probe), std::string::npos) << "the guest's console line never reached console.log";
  EXPECT_EQ(text.rfind("[capsule: log reached ", 0), 0u) << text.substr(0, 200);
  EXPECT_GT(text.rfind(probe), text.size() - 2048) << "QEMU wrote at its old offset, into the kept tail";
  EXPECT_LE(text.size(), bound.keep_bytes + 64 * 1024);
}

TYPED_TEST(BootedVmTest, StopPowersOffAndLeavesNothing) {
  std::promise<hypervisor::VmExit> exited;
  TestFixture::vm_->OnExit([&](const hypervisor::VmExit& e) { exited.set_value(e); });
  std::string dir = TestFixture::vm_->state_dir();
  Status st = TestFixture::vm_->Stop(kGraceful);
  ASSERT_OK(st);
  auto exit = exited.get_future();
  ASSERT_EQ(exit.wait_for(milliseconds(5000)), std::future_status::ready);
  // The agent powered the guest off: QEMU saw the guest's own shutdown.
  EXPECT_NE(exit.get().reason.find("guest-shutdown"), std::string::npos);
  EXPECT_OK(TestFixture::vm_->Stop(kGraceful)) << "Stop is idempotent";
  EXPECT_EQ(TestFixture::vm_->agent().status().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(PathExists(dir));
  ExpectNothingLeft(*TestFixture::env_);
  TestFixture::vm_.reset();
}


}  // namespace
}  // namespace capsule::vm
