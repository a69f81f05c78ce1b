// Templates and clones with every real part (QEMU under TCG here,
// capsule-vsockd, virtiofsd, the built guest image). One template is built
// for the suite; clones restore from it:
//   - the template dir holds its RAM image and a small device state, and
//     nothing of the template VM runs after the build
//   - three clones each answer Check over a vsock device that was
//     hot-plugged after the restore, each draws different kernel random
//     bytes (before any host reseed: vmgenid did it), has its own boot_id
//     and vsock CID, takes the host's clock, and mounts its virtio-fs share
//   - a clone whose QEMU is killed while it restores, one whose state file
//     is corrupt and one of another size fail with the reason and leave
//     nothing (process, memfd, socket, dir)
//   - the dense device set: clones map the template's sealed RAM private
//     under an unprivileged QEMU, answer over the serial vsock that came
//     with the state, differ as above, never change the template, and
//     mount an erofs rootfs from a hot-plugged disk
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <set>

#include "runtime/common/file_util.h"
#include "runtime/erofs/erofs_image.h"
#include "runtime/host/daemon.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"
#include "runtime/vm/sandbox_vm.h"
#include "runtime/vm/vm_template.h"
#include "runtime/wire/agent_auth.h"
#include "runtime/wire/guest_abi.h"
#include "tests/integration/vm/vm_test_env.h"
#include "tests/support/status_matchers.h"

namespace capsule::vm {
namespace {

using std::chrono::milliseconds;
using testing::TestEnv;

void ExpectNothingLeft(const TestEnv& env) {
  EXPECT_TRUE(env.VmDirs().empty()) << ::testing::PrintToString(env.VmDirs());
  for (const std::string& l : env.Leftovers()) {
    // The template dir is the suite's, not a leftover.
    if (l.find("/templates/") == std::string::npos) ADD_FAILURE() << "left: " << l;
  }
  // The dense suite's template holds its sealed RAM for as long as it lives.
  std::string memfds = testing::MemfdsHeldByUs();
  const std::string sealed = "/memfd:capsule-template-00c0ffee00c0ffee (deleted); ";
  if (size_t at = memfds.find(sealed); at != std::string::npos) memfds.erase(memfds.rfind("fd ", at), at + sealed.size() - memfds.rfind("fd ", at));
  EXPECT_EQ(memfds, "");
}

Result<std::string> ReadInGuest(SandboxVm& vm, const std::string& path) {
  ASSIGN_OR_RETURN(agentclient::AgentClient * agent, vm.agent());
  agent::v1::ReadGuestFileRequest req;
  req.set_path(path);
  req.set_max_bytes(4096);
  ASSIGN_OR_RETURN(auto resp, agent->ReadGuestFile(req));
  return resp.data();
}

int64_t HostUnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What tells clones of one template apart, read before any host reseed:
// the kernel's CRNG output (vmgenid's reseed) and its boot_id.
void ReadIdentity(SandboxVm& c, std::set<std::string>& uuids, std::set<std::string>& boot_ids) {
  auto uuid = ReadInGuest(c, "/proc/sys/kernel/random/uuid");
  ASSERT_OK(uuid);
  uuids.insert(*uuid);
  auto boot_id = ReadInGuest(c, "/proc/sys/kernel/random/boot_id");
  ASSERT_OK(boot_id);
  boot_ids.insert(*boot_id);
}

// The clone's pod mounts its hot-plugged virtio-fs share and serves a file
// the host writes there after.
void ServesItsShare(SandboxVm& c, agentclient::AgentClient& agent, const std::string& pod) {
  agent::v1::CreateSandboxRequest req;
  req.set_sandbox_id(pod);
  *req.add_storages() = c.SharedFsStorage();
  ASSERT_OK(agent.CreateSandbox(req));
  ASSERT_OK(WriteFile(c.HostSharedPath("who"), c.id()));
  auto who = ReadInGuest(c, c.GuestSharedPath("who"));
  ASSERT_OK(who);
  EXPECT_EQ(*who, c.id());
}

// The agent token in the clone's vm.json.
Result<std::string> TokenOf(const SandboxVm& c) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(c.state_dir() + "/vm.json"));
  ASSIGN_OR_RETURN(auto record, hypervisor::VmRecordFromJson(text, "vm.json"));
  return record.spec.agent_token;
}

class VmTemplateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { BuildSuiteTemplate(config::DeviceSet::kVirtioFs); }
  static void BuildSuiteTemplate(config::DeviceSet device_set) {
    auto env = TestEnv::Create();
    ASSERT_OK(env);
    env_ = std::move(*env);
    config_ = env_->config();
    config_.guest.device_set = device_set;
    if (device_set == config::DeviceSet::kDense) config_.vsock.backend = config::VsockBackendKind::kSerial;
    root_ = env_->state_dir() + "/templates";
    auto t = BuildTemplate(config_, root_, TemplateSpec{"00c0ffee00c0ffee", 1, 256});
    ASSERT_OK(t);
    tpl_ = std::move(*t);
  }
  static void TearDownTestSuite() {
    if (env_) {
      EXPECT_OK(RemoveTemplate(config_, tpl_.dir));
    }
    env_.reset();
  }
  void SetUp() override {
    if (!env_ || tpl_.dir.empty()) GTEST_SKIP() << "the suite's template was not built";
  }

  static inline std::unique_ptr<TestEnv> env_;
  static inline config::Config config_;
  static inline std::string root_;
  static inline VmTemplate tpl_;
};

TEST_F(VmTemplateTest, ATemplateIsItsRamImageAndASmallDeviceStateWithNothingRunning) {
  EXPECT_EQ(tpl_.dir, root_ + "/00c0ffee00c0ffee");
  struct stat st{};
  ASSERT_EQ(::stat(tpl_.ram_path().c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), 256ull << 20);
  EXPECT_GT(tpl_.ram_allocated_bytes, 16ull << 20) << "the guest's boot wrote its RAM image";
  EXPECT_GT(tpl_.state_bytes, 0u);
  EXPECT_LT(tpl_.state_bytes, 4ull << 20) << "RAM stays out of the device state (x-ignore-shared)";
  EXPECT_FALSE(PathExists(tpl_.dir + "/vm")) << "the template VM's own dir is gone";
  EXPECT_FALSE(PathExists(tpl_.dir + ".building"));
  EXPECT_EQ(tpl_.hotplug_slots, kTemplateHotplugSlots);
  EXPECT_TRUE(testing::ProcessesMentioning(root_).empty()) << "the template's QEMU stopped";
  auto loaded = LoadTemplate(tpl_.dir);
  ASSERT_OK(loaded);
  EXPECT_EQ(loaded->key, tpl_.key);
  EXPECT_EQ(loaded->boot_nic_mac, tpl_.boot_nic_mac);
  EXPECT_EQ(loaded->created_unix_ms, tpl_.created_unix_ms);
}

TEST_F(VmTemplateTest, ThreeClonesAnswerWithTheirOwnRandomnessBootIdCidAndTheHostsClock) {
  std::vector<SandboxVmPtr> clones;
  std::set<std::string> uuids, boot_ids;
  std::set<uint32_t> cids;
  std::vector<std::string> tokens;
  for (int i = 0; i < 3; ++i) {
    SandboxVmSpec spec;
    spec.id = "clone-" + std::to_string(i);
    auto c = SandboxVm::Restore(config_, spec, tpl_);
    ASSERT_OK(c);
    const BootTimings& t = (*c)->timings();
    EXPECT_TRUE(t.restored);
    std::printf("clone %d restored in %.0f ms (prepare %.0f, RAM copy %.0f, VMM start %.0f, state %.0f, hot-plug %.0f, "
                "agent %.0f)\n", i, t.total_ms, t.prepare_ms, t.ram_copy_ms, t.vmm_start_ms, t.state_load_ms,
                t.hotplug_ms, t.agent_ready_ms);
    auto agent = (*c)->agent();
    ASSERT_OK(agent);
    ASSERT_TRUE((*agent)->Check(milliseconds(5000)).ok());
    ASSERT_NO_FATAL_FAILURE(ReadIdentity(**c, uuids, boot_ids));
    // The claim's freshness: the host's clock.
    auto now = HostUnixNs();
    agent::v1::SetGuestTimeRequest time;
    time.set_seconds(now / 1'000'000'000);
    time.set_nanos(now % 1'000'000'000);
    ASSERT_TRUE((*agent)->SetGuestTime(time).ok());
    auto version = (*agent)->Version();
    ASSERT_OK(version);
    EXPECT_LT(std::llabs(version->wall_clock_unix_ns() - HostUnixNs()), 1'000'000'000ll)
        << "clone " << i << "'s clock after SetGuestTime";
    cids.insert(version->local_cid());
    EXPECT_NE(version->local_cid(), 0u);
    ASSERT_NO_FATAL_FAILURE(ServesItsShare(**c, **agent, "pod-" + std::to_string(i)));
    auto token = TokenOf(**c);
    ASSERT_OK(token);
    tokens.push_back(*token);
    clones.push_back(std::move(*c));
  }
  EXPECT_EQ(uuids.size(), 3u) << "each clone's kernel RNG differs before the host reseeds it";
  EXPECT_EQ(boot_ids.size(), 3u) << ::testing::PrintToString(boot_ids);
  EXPECT_EQ(cids.size(), 3u) << ::testing::PrintToString(cids);
  // Each clone's agent, restored from the same RAM, asks fw_cfg for the
  // token of its own VMM: a sibling's is refused.
  ASSERT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), 3u);
  auto stream = clones[0]->DialGuest(guest_abi::kAgentVsockPort, milliseconds(5000));
  ASSERT_OK(stream);
  Status sibling = agent_auth::Prove(stream->get(), tokens[1], milliseconds(10000));
  EXPECT_EQ(sibling.code(), Code::kPermissionDenied) << sibling.ToString();
  for (auto& c : clones) EXPECT_OK(c->Stop(milliseconds(5000)));
  clones.clear();
  ExpectNothingLeft(*env_);
}

TEST_F(VmTemplateTest, AKilledQemuDuringTheRestoreFailsItAndLeavesNothing) {
  SandboxVmSpec spec;
  spec.id = "clone-killed";
  testing::LogTap tap;
  auto restore = std::async(std::launch::async, [&] { return SandboxVm::Restore(config_, spec, tpl_); });
  ASSERT_TRUE(tap.WaitFor("waits for the state", milliseconds(60000)));
  auto record = ReadFile(hypervisor::VmPaths(SandboxVm::StateDirFor(env_->config(), spec.id)).record());
  ASSERT_OK(record);
  auto rec = hypervisor::VmRecordFromJson(*record, "vm.json");
  ASSERT_OK(rec);
  ASSERT_EQ(::kill(rec->vmm.pid, SIGKILL), 0);
  auto vm = restore.get();
  ASSERT_FALSE(vm.ok()) << "a clone whose QEMU died must not be handed out";
  EXPECT_NE(vm.status().message().find("clone-killed"), std::string::npos) << vm.status().ToString();
  ExpectNothingLeft(*env_);
}

TEST_F(VmTemplateTest, ACorruptStateFailsWithQemusWordsAndLeavesNothing) {
  VmTemplate bad = tpl_;
  bad.dir = env_->root() + "/bad-template";
  ASSERT_OK(MkdirAll(bad.dir, 0700));
  ASSERT_EQ(::link(tpl_.ram_path().c_str(), bad.ram_path().c_str()), 0);
  ASSERT_OK(WriteFile(bad.state_path(), std::string(4096, 'x')));
  SandboxVmSpec spec;
  spec.id = "clone-corrupt";
  auto vm = SandboxVm::Restore(config_, spec, bad);
  ASSERT_FALSE(vm.ok());
  EXPECT_NE(vm.status().message().find("load the state"), std::string::npos) << vm.status().ToString();
  ExpectNothingLeft(*env_);
  EXPECT_OK(RemoveAll(bad.dir));
}

TEST_F(VmTemplateTest, ACloneOfAnotherSizeIsRefusedBeforeAnythingStarts) {
  SandboxVmSpec spec;
  spec.id = "clone-big";
  spec.memory_mib = 512;
  auto vm = SandboxVm::Restore(config_, spec, tpl_);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kFailedPrecondition) << vm.status().ToString();
  EXPECT_NE(vm.status().message().find("256 MiB"), std::string::npos) << vm.status().ToString();
  ExpectNothingLeft(*env_);
}

// guest.device_set dense: the serial vsock port is in the template VM from
// its boot and comes back in every clone with the device state, each
// clone's QEMU (an unprivileged, jailed one where the test runs as root)
// joined to a capsule-vsockd of its own; the clone maps the template's
// sealed RAM private; no virtiofsd.
class DenseVmTemplateTest : public VmTemplateTest {
 protected:
  static void SetUpTestSuite() { BuildSuiteTemplate(config::DeviceSet::kDense); }
};

uint64_t Fnv1a(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  uint64_t h = 1469598103934665603ull;
  std::vector<char> buf(1 << 20);
  ssize_t n;
  while (fd && (n = ::read(fd.get(), buf.data(), buf.size())) > 0) {
    for (ssize_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
  }
  return h;
}

// The line of /proc/<pid>/maps that maps `name` ("" if none).
std::string MappingOf(int pid, const std::string& name) {
  auto maps = ReadFile("/proc/" + std::to_string(pid) + "/maps");
  if (!maps.ok()) return "";
  size_t at = maps->find(name);
  if (at == std::string::npos) return "";
  size_t b = maps->rfind('\n', at);
  b = b == std::string::npos ? 0 : b + 1;
  return maps->substr(b, maps->find('\n', at) - b);
}

TEST_F(DenseVmTemplateTest, ClonesMapTheSealedTemplatePrivateAndAnswerOverTheSerialPortEachWithItsOwnIdentity) {
  EXPECT_TRUE(testing::ProcessesMentioning(root_).empty()) << "the template's QEMU and capsule-vsockd stopped";
  ASSERT_TRUE(tpl_.sealed_ram);
  EXPECT_TRUE(IsWriteSealed(tpl_.sealed_ram->get()));
  // Disks go on the virtio-scsi controller, not on root ports.
  EXPECT_EQ(tpl_.hotplug_slots, kTemplateHotplugSlots);
  const std::string sealed = "/proc/self/fd/" + std::to_string(tpl_.sealed_ram->get());
  const uint64_t file_before = Fnv1a(tpl_.ram_path());
  const uint64_t sealed_before = Fnv1a(sealed);
  EXPECT_EQ(sealed_before, file_before) << "the sealed copy is the template's RAM";
  std::vector<SandboxVmPtr> clones;
  std::set<std::string> uuids, boot_ids, tokens;
  for (int i = 0; i < 2; ++i) {
    SandboxVmSpec spec;
    spec.id = "dense-clone-" + std::to_string(i);
    auto c = SandboxVm::Restore(config_, spec, tpl_);
    ASSERT_OK(c);
    const BootTimings& t = (*c)->timings();
    std::printf("dense clone %d restored in %.0f ms (prepare %.0f, RAM %.0f, VMM start %.0f, state %.0f, "
                "hot-plug %.0f, agent %.0f)\n", i, t.total_ms, t.prepare_ms, t.ram_copy_ms, t.vmm_start_ms,
                t.state_load_ms, t.hotplug_ms, t.agent_ready_ms);
    const int pid = (*c)->vmm_pid();
    auto qemu = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    ASSERT_OK(qemu);
    EXPECT_NE(qemu->find("virtserialport"), std::string::npos);
    EXPECT_EQ(qemu->find("vhost-user"), std::string::npos) << "no vhost-user device in the dense set";
    EXPECT_NE(qemu->find("share=off"), std::string::npos);
    const std::string ram = MappingOf(pid, "memfd:capsule-template-" + tpl_.key);
    ASSERT_FALSE(ram.empty()) << "QEMU maps the template's sealed memfd";
    EXPECT_NE(ram.find(" rw-p "), std::string::npos) << "mapped private: " << ram;
    auto status = ReadFile("/proc/" + std::to_string(pid) + "/status");
    ASSERT_OK(status);
    EXPECT_NE(status->find("THP_enabled:\t0\n"), std::string::npos)
        << "a clone's QEMU has no transparent huge pages: its RAM is private pages of a file";
    EXPECT_TRUE(testing::ProcessesMentioning((*c)->state_dir() + "/virtiofsd").empty());
    if (::geteuid() == 0 && config_.hypervisor.vmm_uid_base != 0) {
      struct stat st{};
      ASSERT_EQ(::stat(("/proc/" + std::to_string(pid)).c_str(), &st), 0);
      EXPECT_GE(st.st_uid, config_.hypervisor.vmm_uid_base) << "the clone's QEMU runs unprivileged";
    }
    auto agent = (*c)->agent();
    ASSERT_OK(agent);
    ASSERT_TRUE((*agent)->Check(milliseconds(5000)).ok());
    ASSERT_NO_FATAL_FAILURE(ReadIdentity(**c, uuids, boot_ids));
    auto token = TokenOf(**c);
    ASSERT_OK(token);
    tokens.insert(*token);
    clones.push_back(std::move(*c));
  }
  EXPECT_EQ(uuids.size(), 2u) << "each clone's kernel RNG differs before the host reseeds it";
  EXPECT_EQ(boot_ids.size(), 2u);
  EXPECT_EQ(tokens.size(), 2u);
  // One clone's daemon reaches that clone only: its token is refused by the other.
  auto stream = clones[0]->DialGuest(guest_abi::kAgentVsockPort, milliseconds(5000));
  ASSERT_OK(stream);
  auto other = TokenOf(*clones[1]);
  ASSERT_OK(other);
  Status sibling = agent_auth::Prove(stream->get(), *other, milliseconds(10000));
  EXPECT_EQ(sibling.code(), Code::kPermissionDenied) << sibling.ToString();
  for (auto& c : clones) EXPECT_OK(c->Stop(milliseconds(5000)));
  clones.clear();
  EXPECT_EQ(Fnv1a(sealed), sealed_before) << "a clone's writes reached the template's sealed RAM";
  EXPECT_EQ(Fnv1a(tpl_.ram_path()), file_before) << "a clone's writes reached the template's RAM file";
  ExpectNothingLeft(*env_);
}

// The dense device set's rootfs on a clone: a read-only erofs image of a
// host tree on a SCSI disk hot-plugged by fd onto the controller the clone
// got from its template (QEMU emulates both, so private RAM is fine),
// mounted by the agent from the disk it finds by serial; more disks than
// the VM has root ports fit beside it; unmounted with the pod, the disks
// unplug.
TEST_F(DenseVmTemplateTest, ACloneMountsAnErofsImageFromAHotpluggedDisk) {
  const std::string src = env_->root() + "/rootfs-src";
  ASSERT_OK(MkdirAll(src + "/etc"));
  ASSERT_OK(WriteFile(src + "/etc/os-release", "NAME=erofs-on-a-clone\n"));
  ASSERT_OK(WriteFile(src + "/etc/big", std::string(200000, 'b')));
  const std::string image = env_->root() + "/rootfs.erofs";
  Status made = erofs::MakeErofsImage(src, image);
  ASSERT_OK(made);
  SandboxVmSpec spec;
  spec.id = "dense-blk";
  auto c = SandboxVm::Restore(config_, spec, tpl_);
  ASSERT_OK(c);
  {
    UniqueFd fd(::open(image.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd);
    Status plugged = (*c)->vmm().HotplugDevice(hypervisor::BlockDevice{"rootfs0", image, "c0-rootfs", false, fd.get()});
    ASSERT_OK(plugged);
    for (uint32_t i = 1; i <= kTemplateHotplugSlots; ++i) {
      const std::string id = "rootfs" + std::to_string(i);
      ASSERT_OK((*c)->vmm().HotplugDevice(hypervisor::BlockDevice{id, image, "c" + std::to_string(i), false, fd.get()}));
    }
  }  // QEMU holds its own dups now
  auto agent = (*c)->agent();
  ASSERT_OK(agent);
  agent::v1::CreateSandboxRequest req;
  req.set_sandbox_id("pod-blk");
  auto* st = req.add_storages();
  st->set_driver("blk");
  st->set_source("c0-rootfs");
  st->set_fstype("erofs");
  st->set_mount_point("/run/capsule/c0-rootfs");
  Status created = (*agent)->CreateSandbox(req);
  ASSERT_OK(created);
  auto os = ReadInGuest(**c, "/run/capsule/c0-rootfs/etc/os-release");
  ASSERT_OK(os);
  EXPECT_EQ(*os, "NAME=erofs-on-a-clone\n");
  agent::v1::ReadGuestFileRequest read;
  read.set_path("/run/capsule/c0-rootfs/etc/big");
  read.set_max_bytes(300000);
  auto big = (*agent)->ReadGuestFile(read);
  ASSERT_OK(big);
  EXPECT_EQ(big->data(), std::string(200000, 'b'));
  // The pod's end unmounts it; then the disk unplugs cleanly.
  agent::v1::DestroySandboxRequest destroy;
  Status destroyed = (*agent)->DestroySandbox(destroy);
  ASSERT_OK(destroyed);
  for (uint32_t i = 0; i <= kTemplateHotplugSlots; ++i)
    EXPECT_OK((*c)->vmm().UnplugDevice("rootfs" + std::to_string(i), milliseconds(20000)));
  EXPECT_TRUE((*c)->Stop(milliseconds(5000)).ok());
  ExpectNothingLeft(*env_);
}

// A dense clone whose device state is corrupt fails with QEMU's words and
// leaves nothing: no QEMU, no capsule-vsockd, no VM dir; the template's
// sealed RAM is untouched and serves the next clone.
TEST_F(DenseVmTemplateTest, ACorruptStateFailsAndLeavesNothing) {
  VmTemplate bad = tpl_;  // shares the sealed RAM
  bad.dir = env_->root() + "/bad-dense-template";
  ASSERT_OK(MkdirAll(bad.dir, 0700));
  ASSERT_EQ(::link(tpl_.ram_path().c_str(), bad.ram_path().c_str()), 0);
  ASSERT_OK(WriteFile(bad.state_path(), std::string(4096, 'x')));
  SandboxVmSpec spec;
  spec.id = "dense-corrupt";
  auto vm = SandboxVm::Restore(config_, spec, bad);
  ASSERT_FALSE(vm.ok());
  EXPECT_NE(vm.status().message().find("load the state"), std::string::npos) << vm.status().ToString();
  ExpectNothingLeft(*env_);
  EXPECT_OK(RemoveAll(bad.dir));
  spec.id = "dense-after-corrupt";
  auto good = SandboxVm::Restore(config_, spec, tpl_);
  ASSERT_OK(good);
  EXPECT_TRUE((*good)->Stop(milliseconds(5000)).ok());
  ExpectNothingLeft(*env_);
}

// A template without its sealed RAM (one loaded from disk that nothing
// attached it to) is refused before any process starts.
TEST_F(DenseVmTemplateTest, ATemplateWithoutSealedRamIsRefusedBeforeAnythingStarts) {
  VmTemplate bare = tpl_;
  bare.sealed_ram.reset();
  SandboxVmSpec spec;
  spec.id = "dense-bare";
  auto vm = SandboxVm::Restore(config_, spec, bare);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), Code::kFailedPrecondition) << vm.status().ToString();
  EXPECT_NE(vm.status().message().find("sealed RAM"), std::string::npos) << vm.status().ToString();
  ExpectNothingLeft(*env_);
}

TEST(VmTemplateBuildTest, AFailedBuildLeavesNoTemplateAndNoProcess) {
  auto env = TestEnv::Create();
  ASSERT_OK(env);
  config::Config cfg = (*env)->config();
  cfg.guest.kernel = (*env)->root() + "/not-a-kernel";
  ASSERT_OK(WriteFile(cfg.guest.kernel, "garbage"));
  const std::string root = (*env)->state_dir() + "/templates";
  auto t = BuildTemplate(cfg, root, TemplateSpec{"0123456789abcdef", 1, 256});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("0123456789abcdef"), std::string::npos) << t.status().ToString();
  EXPECT_FALSE(PathExists(root + "/0123456789abcdef"));
  EXPECT_FALSE(PathExists(root + "/0123456789abcdef.building"));
  EXPECT_TRUE((*env)->Leftovers().empty()) << ::testing::PrintToString((*env)->Leftovers());
}

}  // namespace
}  // namespace capsule::vm
