// The QEMU driver against real qemu-system-x86_64 (TCG). Most VMs boot no
// guest at all (-S, no kernel); one boots a 60-byte multiboot guest that
// prints to the console and triple-faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <set>

#include <atomic>
#include <future>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "runtime/common/subprocess.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/qemu_hypervisor.h"
#include "runtime/hypervisor/qemu_vmm.h"
#include "runtime/hypervisor/vm_record.h"
#include "tests/runtime/hypervisor/vm_test_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::hypervisor {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using testing::DirEntries;
using testing::ProcessesMentioning;
using testing::ProcessGone;

class QemuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PathExists(cfg_.hypervisor.path)) GTEST_SKIP() << cfg_.hypervisor.path << " not installed";
    auto dir = TempDir::Create("qemu-it");
    ASSERT_OK(dir);
    root_ = std::make_unique<TempDir>(std::move(*dir));
    // QEMU runs as a uid of its own: the fake QEMUs and guest images the
    // cases write here must be reachable by others.
    ASSERT_EQ(::chmod(root_->path().c_str(), 0755), 0);
    cfg_.runtime.state_dir = root_->path();
  }
  void TearDown() override {
    // Whatever a test did, no QEMU of ours may survive it.
    if (root_) {
      EXPECT_TRUE(ProcessesMentioning(root_->path()).empty()) << "leaked a process";
    }
  }

  VmSpec Spec(const std::string& id) {
    VmSpec s;
    s.id = id;
    s.state_dir = DefaultVmStateDir(root_->path(), id);
    s.memory_mib = 128;
    s.start_paused = true;
    s.hotplug_slots = 2;
    return s;
  }

  std::string Cmdline(pid_t pid) {
    auto c = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    std::string s = c.ok() ? *c : "";
    for (char& ch : s) {
      if (ch == '\0') ch = ' ';
    }
    return s;
  }

  config::Config cfg_;
  std::unique_ptr<TempDir> root_;
};

Result<json> Qmp(Vmm& vm, const std::string& cmd, const json& args = nullptr) {
  return static_cast<QemuVmm&>(vm).qmp()->Execute(cmd, args);
}

TEST_F(QemuTest, LaunchPausedThenResumePauseStopLeavesNothing) {
  QemuHypervisor hv(cfg_);
  VmSpec spec = Spec("vm1");
  auto vm = hv.Launch(spec);
  ASSERT_OK(vm);
  pid_t pid = (*vm)->vmm_pid();
  EXPECT_EQ((*vm)->state(), VmState::kPaused);
  EXPECT_EQ((*vm)->accelerator(), Accelerator::kTcg);  // no usable KVM on the build hosts
  EXPECT_EQ((*Qmp(**vm, "query-status"))["status"], "prelaunch");

  // Everything an adopter needs is in the state dir.
  VmPaths paths(spec.state_dir);
  for (const auto& f : {paths.record(), paths.lock(), paths.qmp_socket(), paths.console_log(), paths.vmm_log(), paths.pidfile()})
    EXPECT_TRUE(PathExists(f)) << f;
  auto pidfile = ReadFile(paths.pidfile());
  ASSERT_OK(pidfile);
  EXPECT_EQ(std::stoi(*pidfile), pid);
  auto rec = VmRecordFromJson(*ReadFile(paths.record()), paths.record());
  ASSERT_OK(rec);
  EXPECT_EQ(rec->vmm.pid, pid);
  EXPECT_EQ(rec->vmm_version.substr(0, 2), (*hv.Capabilities()).version.substr(0, 2));

  // A daemon: not our child, in its own session, sandboxed, TCG.
  std::string cmd = Cmdline(pid);
  EXPECT_NE(cmd.find("-sandbox on,obsolete=deny"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("-accel tcg,tb-size=64"), std::string::npos) << cmd;
  EXPECT_NE(::getsid(pid), ::getsid(0));

  ASSERT_TRUE((*vm)->Resume().ok());
  EXPECT_EQ((*vm)->state(), VmState::kRunning);
  EXPECT_EQ((*Qmp(**vm, "query-status"))["status"], "running");
  ASSERT_TRUE((*vm)->Pause().ok());
  EXPECT_EQ((*Qmp(**vm, "query-status"))["status"], "paused");
  ASSERT_TRUE((*vm)->Resume().ok());

  int exit_fd = (*vm)->exit_fd();
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_TRUE(PidfdExited(exit_fd));
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_EQ((*vm)->state(), VmState::kExited);
  auto exit = (*vm)->WaitExit(milliseconds(0));
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->requested);
  EXPECT_EQ(exit->reason, "QEMU shut down: host-qmp-quit");
  EXPECT_FALSE(PathExists(spec.state_dir));
  EXPECT_TRUE((*vm)->Stop(milliseconds(0)).ok());  // idempotent
  EXPECT_EQ((*vm)->Pause().code(), Code::kFailedPrecondition);
  EXPECT_EQ((*vm)->Pause().message(), "cannot pause VM vm1 in state exited");
}

// The guest's RAM (QEMU's memfd backend) can be held past the VMM's exit,
// so that freeing it is the holder's close and not part of the stop.
TEST_F(QemuTest, TheGuestRamOutlivesTheVmmWhileReferenced) {
  QemuHypervisor hv(cfg_);
  auto vm = hv.Launch(Spec("ram"));
  ASSERT_OK(vm);
  std::vector<UniqueFd> ram = (*vm)->ReferenceGuestRam();
  ASSERT_EQ(ram.size(), 1u) << "expected QEMU's one RAM memfd (the small agent-token memfd is not RAM)";
  struct stat st{};
  ASSERT_EQ(::fstat(ram[0].get(), &st), 0);
  EXPECT_EQ(st.st_size, off_t{128} << 20);
  const ino_t ino = st.st_ino;

  pid_t pid = (*vm)->vmm_pid();
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_TRUE((*vm)->ReferenceGuestRam().empty()) << "a stopped VM has no RAM to reference";
  // Still the same 128 MiB file, now held by us alone.
  ASSERT_EQ(::fstat(ram[0].get(), &st), 0);
  EXPECT_EQ(st.st_ino, ino);
  EXPECT_EQ(st.st_size, off_t{128} << 20);
}

TEST_F(QemuTest, GracefulStopEscalatesToQuitWhenTheGuestIgnoresPowerdown) {
  QemuHypervisor hv(cfg_);
  VmSpec spec = Spec("vm-grace");
  spec.start_paused = false;  // firmware only: nothing handles the ACPI button
  auto vm = hv.Launch(spec);
  ASSERT_OK(vm);
  EXPECT_EQ((*vm)->state(), VmState::kRunning);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE((*vm)->Stop(milliseconds(300)).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(300));
  auto exit = (*vm)->WaitExit(milliseconds(0));
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->requested);
  EXPECT_EQ(exit->reason, "QEMU shut down: host-qmp-quit");
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, DestroyingTheVmObjectStopsAndCleansUp) {
  QemuHypervisor hv(cfg_);
  VmSpec spec = Spec("vm-raii");
  pid_t pid;
  {
    auto vm = hv.Launch(spec);
    ASSERT_OK(vm);
    pid = (*vm)->vmm_pid();
  }
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, HotplugAndUnplugTapNic) {
  if (!PathExists("/dev/net/tun")) GTEST_SKIP() << "/dev/net/tun absent";
  // A tap by name needs a VMM with CAP_NET_ADMIN; pods' taps come as fds.
  cfg_.hypervisor.vmm_uid_base = 0;
  QemuHypervisor root_hv(cfg_);
  VmSpec spec = Spec("vm-net");
  auto vm = root_hv.Launch(spec);
  ASSERT_OK(vm);
  std::string tap = "cpt" + std::to_string(::getpid() % 100000);
  // A tap by name is made in QEMU's own network namespace (a private one
  // when we are root); /proc/<pid>/net/dev lists that namespace's links.
  const pid_t pid = (*vm)->vmm_pid();
  auto in_vmm_netns = [pid, &tap] {
    auto dev = ReadFile("/proc/" + std::to_string(pid) + "/net/dev");
    // Names are right-aligned in 6 columns: longer ones start the line.
    return dev.ok() && (dev->find(" " + tap + ":") != std::string::npos || dev->find("\n" + tap + ":") != std::string::npos);
  };
  Device nic = NetDevice{"eth0", tap, "52:54:00:12:34:56", ""};
  ASSERT_TRUE((*vm)->HotplugDevice(nic).ok());
  EXPECT_TRUE(in_vmm_netns()) << "QEMU should have created the tap";
  auto mac = Qmp(**vm, "qom-get", json{{"path", "/machine/peripheral/eth0"}, {"property", "mac"}});
  ASSERT_OK(mac);
  EXPECT_EQ(*mac, "52:54:00:12:34:56");
  auto hot = static_cast<QemuVmm&>(**vm).hotplugged();
  ASSERT_EQ(hot.size(), 1u);
  EXPECT_EQ(hot[0].port, "rp0");
  auto rec = VmRecordFromJson(*ReadFile(VmPaths(spec.state_dir).record()), "vm.json");
  ASSERT_OK(rec);
  EXPECT_EQ(rec->hotplugged, hot);

  Status dup = (*vm)->HotplugDevice(nic);
  EXPECT_EQ(dup.code(), Code::kAlreadyExists) << dup.ToString();

  ASSERT_TRUE((*vm)->UnplugDevice("eth0", milliseconds(10000)).ok());
  EXPECT_FALSE(in_vmm_netns()) << "tap should go with its netdev";
  EXPECT_TRUE(static_cast<QemuVmm&>(**vm).hotplugged().empty());
  EXPECT_EQ(Qmp(**vm, "qom-get", json{{"path", "/machine/peripheral/eth0"}, {"property", "mac"}}).status().code(),
            Code::kNotFound);
  EXPECT_EQ((*vm)->UnplugDevice("eth0", milliseconds(1000)).code(), Code::kNotFound);
  // The slot is free again, and the id reusable.
  ASSERT_TRUE((*vm)->HotplugDevice(nic).ok());
  EXPECT_EQ(static_cast<QemuVmm&>(**vm).hotplugged()[0].port, "rp0");
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_FALSE(PathExists("/sys/class/net/" + tap)) << "nor in ours";
}

TEST_F(QemuTest, QemuRunsInANetworkNamespaceOfItsOwnWhenRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "a private netns needs root";
  QemuHypervisor hv(cfg_);
  auto vm = hv.Launch(Spec("vm-netns"));
  ASSERT_OK(vm);
  char ours[64] = {}, its[64] = {};
  ASSERT_GT(::readlink("/proc/self/ns/net", ours, sizeof ours - 1), 0);
  ASSERT_GT(::readlink(("/proc/" + std::to_string((*vm)->vmm_pid()) + "/ns/net").c_str(), its, sizeof its - 1), 0);
  EXPECT_STRNE(ours, its) << "QEMU shares the host's network namespace";
  // Nothing but a loopback there.
  auto dev = ReadFile("/proc/" + std::to_string((*vm)->vmm_pid()) + "/net/dev");
  ASSERT_OK(dev);
  EXPECT_EQ(std::count(dev->begin(), dev->end(), '\n'), 3) << *dev;  // two header lines + lo
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
}

// Status lines of a process's /proc/<pid>/status ("Uid:", "CapEff:" ...).
std::string StatusField(pid_t pid, const std::string& key) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/status");
  if (!text.ok()) return "";
  const size_t at = text->find("\n" + key + ":");
  if (at == std::string::npos) return "";
  const size_t from = text->find_first_not_of(" \t", at + key.size() + 2);
  return text->substr(from, text->find('\n', from) - from);
}

std::string NsOf(const std::string& pid, const char* ns) {
  char buf[64] = {};
  return ::readlink(("/proc/" + pid + "/ns/" + ns).c_str(), buf, sizeof buf - 1) > 0 ? buf : "";
}

// Firecracker's jailer, for QEMU: a uid and gid of its own per VM, no
// capability, no_new_privs, seccomp, and mount and network namespaces of
// its own; the uid is free again once its QEMU is gone.
TEST_F(QemuTest, QemuRunsAsAUidOfItsOwnWithoutCapabilitiesInNamespacesOfItsOwn) {
  if (::geteuid() != 0) GTEST_SKIP() << "changing uid and making namespaces needs root";
  QemuHypervisor hv(cfg_);
  auto a = hv.Launch(Spec("vm-uid-a"));
  ASSERT_OK(a);
  auto b = hv.Launch(Spec("vm-uid-b"));
  ASSERT_OK(b);
  std::set<std::string> uids;
  for (Vmm* vm : {a->get(), b->get()}) {
    const pid_t pid = vm->vmm_pid();
    auto rec = VmRecordFromJson(*ReadFile(VmPaths(vm->state_dir()).record()), "vm.json");
    ASSERT_OK(rec);
    ASSERT_GE(rec->vmm_uid, static_cast<int64_t>(cfg_.hypervisor.vmm_uid_base));
    ASSERT_LT(rec->vmm_uid, static_cast<int64_t>(cfg_.hypervisor.vmm_uid_base) + cfg_.hypervisor.vmm_uid_count);
    const std::string id = std::to_string(rec->vmm_uid);
    EXPECT_EQ(StatusField(pid, "Uid"), id + "\t" + id + "\t" + id + "\t" + id);
    EXPECT_EQ(StatusField(pid, "Gid"), id + "\t" + id + "\t" + id + "\t" + id);
    EXPECT_EQ(StatusField(pid, "CapEff"), "0000000000000000");
    EXPECT_EQ(StatusField(pid, "CapPrm"), "0000000000000000");
    EXPECT_EQ(StatusField(pid, "NoNewPrivs"), "1");
    EXPECT_EQ(StatusField(pid, "Seccomp"), "2") << "-sandbox on";
    for (const char* ns : {"mnt", "net"}) EXPECT_NE(NsOf(std::to_string(pid), ns), NsOf("self", ns)) << ns;
    // Jailed: its root is a tmpfs holding /usr and a few devices; the
    // host's /etc and every VM's state dir (its own too) are not there.
    const std::string root = "/proc/" + std::to_string(pid) + "/root";
    EXPECT_TRUE(PathExists(root + "/usr/bin")) << root;
    EXPECT_TRUE(PathExists(root + "/dev/null")) << root;
    EXPECT_FALSE(PathExists(root + "/etc/passwd")) << "the host's /etc is visible to QEMU";
    EXPECT_FALSE(PathExists(root + vm->state_dir())) << "a state dir is visible to QEMU";
    EXPECT_FALSE(PathExists(root + "/tmp")) << root;
    uids.insert(id);
    // It runs, for real: QMP answers, and pause/resume work.
    EXPECT_OK(vm->Resume());
    EXPECT_OK(vm->Pause());
  }
  EXPECT_EQ(uids.size(), 2u) << "two VMMs never share a uid";
  const std::string lock = root_->Join("vmm-uids/" + *uids.begin() + ".lock");
  ASSERT_TRUE(PathExists(lock));
  ASSERT_TRUE((*a)->Stop(milliseconds(0)).ok());
  ASSERT_TRUE((*b)->Stop(milliseconds(0)).ok());
  UniqueFd fd(::open(lock.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  EXPECT_EQ(::flock(fd.get(), LOCK_EX | LOCK_NB), 0) << "the uid is free once its QEMU exited";
}

TEST_F(QemuTest, HotplugFailuresAreCleanAndSlotsAreBounded) {
  QemuHypervisor hv(cfg_);
  auto vm = hv.Launch(Spec("vm-hp"));
  ASSERT_OK(vm);
  // An unprivileged QEMU cannot make a tap: a NIC must come as an fd.
  Status by_name = (*vm)->HotplugDevice(NetDevice{"n9", "cpq9", "52:54:00:00:00:09", ""});
  EXPECT_EQ(by_name.code(), Code::kFailedPrecondition) << by_name.ToString();
  EXPECT_NE(by_name.message().find("cannot make a tap"), std::string::npos) << by_name.ToString();
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  // The rest with a QEMU that may make taps by name.
  cfg_.hypervisor.vmm_uid_base = 0;
  QemuHypervisor root_hv(cfg_);
  vm = root_hv.Launch(Spec("vm-hp"));
  ASSERT_OK(vm);
  // No back end listens there: chardev-add fails and nothing is left half-added.
  Device vs = VsockDevice{"vsock0", VsockDevice::Backend::kVhostUser, 0, root_->Join("nobody.sock")};
  Status st = (*vm)->HotplugDevice(vs);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("connect " + root_->Join("nobody.sock")), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("hot-plug vsock device 'vsock0' into VM vm-hp"), std::string::npos) << st.ToString();
  EXPECT_TRUE(static_cast<QemuVmm&>(**vm).hotplugged().empty());
  EXPECT_EQ((*vm)->HotplugDevice(NetDevice{"bad id", "t", "52:54:00:00:00:01", ""}).code(), Code::kInvalidArgument);
  if (PathExists("/dev/net/tun")) {
    std::string base = "cpq" + std::to_string(::getpid() % 100000);
    ASSERT_TRUE((*vm)->HotplugDevice(NetDevice{"n0", base + "a", "52:54:00:00:00:01", ""}).ok());
    ASSERT_TRUE((*vm)->HotplugDevice(NetDevice{"n1", base + "b", "52:54:00:00:00:02", ""}).ok());
    Status full = (*vm)->HotplugDevice(NetDevice{"n2", base + "c", "52:54:00:00:00:03", ""});
    EXPECT_EQ(full.code(), Code::kResourceExhausted) << full.ToString();
  }
}

TEST_F(QemuTest, DetachThenAttachFromAnotherDriver) {
  VmSpec spec = Spec("vm-adopt");
  pid_t pid;
  {
    QemuHypervisor first(cfg_);
    auto vm = first.Launch(spec);
    ASSERT_OK(vm);
    pid = (*vm)->vmm_pid();
    ASSERT_TRUE((*vm)->Resume().ok());
    ASSERT_TRUE((*vm)->Detach().ok());
    EXPECT_EQ((*vm)->state(), VmState::kDetached);
    EXPECT_EQ((*vm)->Stop(milliseconds(0)).code(), Code::kFailedPrecondition);
  }  // both the Vmm and its driver are gone
  EXPECT_FALSE(ProcessGone(pid));
  EXPECT_TRUE(PathExists(VmPaths(spec.state_dir).record()));

  QemuHypervisor second(cfg_);
  auto adopted = second.Attach(spec.state_dir);
  ASSERT_OK(adopted);
  EXPECT_EQ((*adopted)->vmm_pid(), pid);
  EXPECT_EQ((*adopted)->id(), "vm-adopt");
  EXPECT_EQ((*adopted)->state(), VmState::kRunning);
  // One driver at a time.
  auto third = second.Attach(spec.state_dir);
  EXPECT_EQ(third.status().code(), Code::kFailedPrecondition) << third.status().ToString();
  ASSERT_TRUE((*adopted)->Pause().ok());
  std::promise<VmExit> exited;
  (*adopted)->OnExit([&](const VmExit& e) { exited.set_value(e); });
  ASSERT_TRUE((*adopted)->Stop(milliseconds(0)).ok());
  EXPECT_TRUE(exited.get_future().get().requested);
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_FALSE(PathExists(spec.state_dir));
  EXPECT_EQ(second.Attach(spec.state_dir).status().code(), Code::kNotFound);
}

TEST_F(QemuTest, AttachToAVmThatDiedWhileDetachedCleansUp) {
  VmSpec spec = Spec("vm-dead");
  QemuHypervisor hv(cfg_);
  pid_t pid;
  {
    auto vm = hv.Launch(spec);
    ASSERT_OK(vm);
    pid = (*vm)->vmm_pid();
    auto pidfd = OpenPidfd(pid);
    ASSERT_OK(pidfd);
    ASSERT_TRUE((*vm)->Detach().ok());
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_TRUE(PidfdWait(pidfd->get(), 10000));
  }
  auto vm = hv.Attach(spec.state_dir);
  ASSERT_OK(vm);
  EXPECT_EQ((*vm)->state(), VmState::kExited);
  auto exit = (*vm)->WaitExit(milliseconds(0));
  ASSERT_TRUE(exit.has_value());
  EXPECT_NE(exit->reason.find("exited while no driver was attached"), std::string::npos) << exit->reason;
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, SigkilledQemuIsNoticedAtOnce) {
  QemuHypervisor hv(cfg_);
  VmSpec spec = Spec("vm-kill");
  auto vm = hv.Launch(spec);
  ASSERT_OK(vm);
  std::promise<VmExit> exited;
  std::atomic<int64_t> noticed_ns{0};
  (*vm)->OnExit([&](const VmExit& e) {
    noticed_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    exited.set_value(e);
  });
  auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill((*vm)->vmm_pid(), SIGKILL), 0);
  auto fut = exited.get_future();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  VmExit e = fut.get();
  auto latency = std::chrono::nanoseconds(noticed_ns.load()) - killed_at.time_since_epoch();
  std::printf("death noticed after %.1f ms\n", static_cast<double>(latency.count()) / 1e6);
  EXPECT_FALSE(e.requested);
  EXPECT_EQ(e.reason, "QEMU exited without a SHUTDOWN event (killed or crashed)");
  EXPECT_EQ((*vm)->state(), VmState::kExited);
  EXPECT_EQ((*vm)->HotplugDevice(NetDevice{"n", "t", "52:54:00:00:00:01", ""}).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(PathExists(spec.state_dir));  // kept until Stop, for post-mortems
  ASSERT_TRUE((*vm)->Stop(milliseconds(0)).ok());
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, GuestThatDiesIsReportedWithItsConsoleTail) {
  ASSERT_OK(WriteFile(root_->Join("guest.bin"), testing::MultibootGuestImage("capsule-test-guest: hello\n")));
  QemuHypervisor hv(cfg_);
  VmSpec spec = Spec("vm-guest");
  spec.kernel = root_->Join("guest.bin");
  spec.start_paused = false;
  auto vm = hv.Launch(spec);
  ASSERT_OK(vm);
  auto e = (*vm)->WaitExit(milliseconds(60000));
  ASSERT_TRUE(e.has_value()) << "the test guest should triple-fault within seconds";
  EXPECT_FALSE(e->requested);
  EXPECT_EQ(e->reason, "QEMU shut down: guest-reset");
  EXPECT_EQ(e->console_tail, "capsule-test-guest: hello\n");
  EXPECT_NE(e->Describe("vm-guest").find("--- console tail ---\ncapsule-test-guest: hello"), std::string::npos);
}

TEST_F(QemuTest, BadQemuPathFailsWithoutLeftovers) {
  cfg_.hypervisor.path = "/nonexistent/qemu-system-x86_64";
  {
    QemuHypervisor hv(cfg_);  // probing the binary fails first
    auto vm = hv.Launch(Spec("vm-nobin"));
    ASSERT_FALSE(vm.ok());
    EXPECT_NE(vm.status().message().find("/nonexistent/qemu-system-x86_64"), std::string::npos) << vm.status().ToString();
  }
  QemuHypervisorOptions o;
  o.capabilities = QemuCapabilities{"7.2.0", "", true};  // skip the probe: fail at spawn
  QemuHypervisor hv(cfg_, o);
  VmSpec spec = Spec("vm-nobin");
  auto vm = hv.Launch(spec);
  ASSERT_FALSE(vm.ok());
  EXPECT_NE(vm.status().message().find("spawn /nonexistent/qemu-system-x86_64: No such file or directory"),
            std::string::npos)
      << vm.status().ToString();
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, AMissingKernelIsNamedAndABadOneCarriesQemusOwnMessage) {
  QemuHypervisor hv(cfg_);
  VmSpec spec = Spec("vm-nokernel");
  // The launcher opens the kernel for QEMU (a jailed QEMU cannot see it).
  spec.kernel = root_->Join("no-such-vmlinuz");
  auto vm = hv.Launch(spec);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kNotFound) << vm.status().ToString();
  EXPECT_NE(vm.status().message().find("open the guest kernel " + spec.kernel), std::string::npos)
      << vm.status().message();
  EXPECT_FALSE(PathExists(spec.state_dir));
  // One QEMU cannot load: its own words come back.
  spec.kernel = root_->Join("garbage-vmlinuz");
  ASSERT_OK(WriteFile(spec.kernel, "this is not a kernel\n"));
  vm = hv.Launch(spec);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kUnavailable) << vm.status().ToString();
  EXPECT_REASON(vm, reason::kVmmExited);
  EXPECT_NE(vm.status().message().find("launch VM vm-nokernel: QEMU exited during start-up; QEMU said:"), std::string::npos)
      << vm.status().message() << ": QEMU's own words are kept";
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, QmpThatNeverAnswersTimesOutAndKillsTheProcess) {
  std::string fake = root_->Join("fake-qemu");
  // Jailed, the fake sees none of our dirs: its pid comes back in its log.
  ASSERT_OK(WriteFile(fake, "#!/bin/sh\necho \"fake-qemu pid $$\" >&2\nexec sleep 600\n"));
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  cfg_.hypervisor.path = fake;
  QemuHypervisorOptions o;
  o.capabilities = QemuCapabilities{"7.2.0", "", true};
  o.qmp_ready_timeout = milliseconds(500);
  QemuHypervisor hv(cfg_, o);
  VmSpec spec = Spec("vm-mute");
  auto vm = hv.Launch(spec);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kDeadlineExceeded) << vm.status().ToString();
  EXPECT_NE(vm.status().message().find("no QMP greeting"), std::string::npos) << vm.status().ToString();
  const size_t at = vm.status().message().find("fake-qemu pid ");
  ASSERT_NE(at, std::string::npos) << vm.status().ToString();
  EXPECT_TRUE(ProcessGone(std::stoi(vm.status().message().substr(at + 14))));
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, VmmThatExitsAtOnceReportsItsStderr) {
  std::string fake = root_->Join("fake-qemu");
  ASSERT_OK(WriteFile(fake, "#!/bin/sh\necho 'fake-qemu: cannot do that' >&2\nexit 1\n"));
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  cfg_.hypervisor.path = fake;
  QemuHypervisorOptions o;
  o.capabilities = QemuCapabilities{"7.2.0", "", true};
  QemuHypervisor hv(cfg_, o);
  VmSpec spec = Spec("vm-exit");
  auto vm = hv.Launch(spec);
  ASSERT_FALSE(vm.ok());
  EXPECT_REASON(vm, reason::kVmmExited) << "the reason survives the appended log tail";
  EXPECT_NE(vm.status().message().find("QEMU exited during start-up; QEMU said: fake-qemu: cannot do that"),
            std::string::npos)
      << vm.status().ToString();
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, KvmRequestedWhereKvmIsUnusableIsAClearError) {
  AccelDecision here = JudgeKvm(GatherKvmFacts());
  if (here.kvm_usable) GTEST_SKIP() << "this host has usable KVM: " << here.reason;
  QemuHypervisor hv(cfg_);
  VmSpec spec = Spec("vm-kvm");
  spec.accelerator = config::Accelerator::kKvm;
  auto vm = hv.Launch(spec);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(vm.status().message(), "accelerator: kvm configured but " + here.reason);
  EXPECT_FALSE(PathExists(spec.state_dir));
}

TEST_F(QemuTest, LaunchOverALiveVmFailsAndLeavesItAlone) {
  QemuHypervisor hv(cfg_);
  VmSpec spec = Spec("vm-twice");
  auto vm = hv.Launch(spec);
  ASSERT_OK(vm);
  auto again = hv.Launch(spec);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kFailedPrecondition) << again.status().ToString();
  EXPECT_FALSE(ProcessGone((*vm)->vmm_pid()));
  EXPECT_TRUE(PathExists(VmPaths(spec.state_dir).record()));
  EXPECT_TRUE((*Qmp(**vm, "query-status")).is_object());
  // Detached, a leftover vm.json still blocks a second launch.
  ASSERT_TRUE((*vm)->Detach().ok());
  auto third = hv.Launch(spec);
  EXPECT_EQ(third.status().code(), Code::kAlreadyExists) << third.status().ToString();
  auto adopted = hv.Attach(spec.state_dir);
  ASSERT_OK(adopted);
  EXPECT_TRUE((*adopted)->Stop(milliseconds(0)).ok());
  EXPECT_TRUE(DirEntries(root_->Join("vm")).empty());
}

}  // namespace
}  // namespace capsule::hypervisor
