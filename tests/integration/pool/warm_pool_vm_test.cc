// The warm pool with real VMs. In-process, refilling by boot: the pool
// fills to its size with booted, paused VMs; Status says so; a claim hands
// one over by its state dir (marked claimed) and it adopts with its agent
// answering, dialled when the stream it was handed is dead; the pool refills; a claim nobody adopts is reaped after the
// grace; a shape seen for the first time is a miss that registers it;
// Drain leaves nothing. Refilling from a template: the pool builds one
// template and fills with clones of it; a changed initrd or shape makes a
// new template and deletes the old one; a clone whose QEMU is killed while
// it restores leaves nothing and a boot takes its place. As a process
// (template refill): the claimant takes the agent stream the daemon opened
// before the claim, once, and adopts on it; capsule-poold killed with
// SIGKILL while one VM is claimed (and adopted) and one idles: the claimed VM keeps working, a
// restarted daemon reaps the idle one, keeps the template and leaves the
// claimed one alone; SIGTERM drains. A test build of the daemon dies inside
// the claim window: the claim fails, and the next daemon reaps the VM.
// Tenant-sized shapes share one cap of idle VMs and expire.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "runtime/common/backoff.h"
#include "runtime/common/file_util.h"
#include "runtime/host/process_priority.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"
#include "runtime/pool/pool_record.h"
#include "runtime/pool/warm_pool.h"
#include "runtime/vm/sandbox_vm.h"
#include "tests/integration/vm/vm_test_env.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/status_matchers.h"

namespace capsule::pool {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using vm::testing::TestEnv;

constexpr seconds kBootBudget{120};  // one TCG boot, on a loaded host

Claimant Self(const std::string& sandbox) {
  Claimant c;
  c.ns = "test";
  c.sandbox_id = sandbox;
  auto id = IdentifyProcess(::getpid());
  if (id.ok()) c.process = *id;
  return c;
}

std::vector<std::string> VmDirNames(const std::string& state_dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir((state_dir + "/vm").c_str());
  while (dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    if (e->d_name[0] != '.') out.emplace_back(e->d_name);
  }
  if (d != nullptr) ::closedir(d);
  return out;
}

const ShapeStatus* DefaultShape(const PoolStatus& st, const std::string& key) {
  for (const auto& s : st.shapes)
    if (s.key == key) return &s;
  return nullptr;
}

// Adopts a claimed VM the way the shim does: take vm.lock, check the
// agent (on `stream` when given, else dialled), remove the pool's mark.
vm::SandboxVmPtr AdoptClaimed(const config::Config& cfg, const Claimed& c, UniqueFd stream = UniqueFd()) {
  auto v = vm::SandboxVm::Adopt(cfg, c.state_dir, std::move(stream));
  EXPECT_OK(v);
  if (!v.ok()) return nullptr;
  auto agent = (*v)->agent();
  EXPECT_OK(agent);
  if (agent.ok()) {
    EXPECT_TRUE((*agent)->Check(milliseconds(5000)).ok()) << "the claimed VM was resumed";
  }
  EXPECT_OK(RemovePoolRecord(c.state_dir));
  return std::move(*v);
}

class WarmPoolVmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto env = TestEnv::Create();
    ASSERT_OK(env);
    env_ = std::move(*env);
    cfg_ = env_->config();
    cfg_.pool.size = 1;
    cfg_.pool.socket = env_->root() + "/pool.sock";
    cfg_.pool.cgroup = "/capsule-pool-test-" + std::to_string(::getpid());
    auto key = ShapeKey(cfg_, Resolve(cfg_, Shape{}));
    ASSERT_OK(key);
    key_ = *key;
  }
  void TearDown() override {
    auto left = env_->Leftovers();
    EXPECT_TRUE(left.empty()) << left.size() << " left, first: " << left.front();
  }
  std::unique_ptr<TestEnv> env_;
  config::Config cfg_;
  std::string key_;
};

// The nice values of every thread of `pid`.
std::set<int> ThreadNices(pid_t pid) {
  std::set<int> out;
  for (const std::string& tid : ListDir("/proc/" + std::to_string(pid) + "/task")) {
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(std::stoul(tid)));
    if (errno == 0) out.insert(nice);
  }
  return out;
}

TEST_F(WarmPoolVmTest, FillsClaimsRefillsReapsUnadoptedClaimsAndDrainsToNothing) {
  WarmPoolOptions o;
  o.config = cfg_;
  o.config.pool.refill = "boot";
  o.claim_grace = seconds(2);
  o.scan_interval = milliseconds(500);
  auto started = WarmPool::Start(o);
  ASSERT_OK(started);
  std::unique_ptr<WarmPool> pool = std::move(*started);

  auto ready = [&](uint32_t n) {
    return WaitUntil([&] { auto* s = DefaultShape(pool->GetStatus(), key_); return s && s->ready >= n; }, kBootBudget);
  };
  ASSERT_TRUE(ready(1)) << "the pool never filled";
  PoolStatus st = pool->GetStatus();
  const ShapeStatus* s = DefaultShape(st, key_);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->target, 1u);
  EXPECT_EQ(s->booting, 0u) << "no more than the target";
  EXPECT_EQ(s->boots, 1u);
  EXPECT_GT(s->boot_p50_ms, 0.0);
  EXPECT_GT(s->idle_vm_rss_bytes, 0u);
  EXPECT_EQ(st.accelerator.empty(), false);
  // Refills boot in the pool's refill group, which weighs as one nice-10
  // thread against the pods' groups (a nice value ranks only inside its
  // group); ready VMs sit in the pool's own group at the normal weight.
  const std::string refill = cfg_.pool.cgroup + "-refill";
  if (PathExists("/sys/fs/cgroup/cpu" + refill + "/cpu.shares")) {
    EXPECT_EQ(ReadFile("/sys/fs/cgroup/cpu" + refill + "/cpu.shares").value_or(""), "102\n");
    EXPECT_EQ(ReadFile("/sys/fs/cgroup/cpu" + cfg_.pool.cgroup + "/cpu.shares").value_or(""), "1024\n");
  } else if (PathExists("/sys/fs/cgroup" + refill + "/cpu.weight")) {  // v2 with the cpu controller on
    EXPECT_EQ(ReadFile("/sys/fs/cgroup" + refill + "/cpu.weight").value_or(""), "10\n");
  }
  // Idle VMs live in the pool's own cgroup.
  const auto vmms = vm::testing::ProcessesMentioning("guest=pool-");
  ASSERT_FALSE(vmms.empty());
  for (pid_t pid : vmms) {
    auto cg = ReadFile("/proc/" + std::to_string(pid) + "/cgroup");
    ASSERT_OK(cg);
    EXPECT_TRUE(cg->find(":memory:" + cfg_.pool.cgroup + "\n") != std::string::npos ||
                cg->find("0::" + cfg_.pool.cgroup + "\n") != std::string::npos)
        << "pid " << pid << " not in " << cfg_.pool.cgroup << ":\n" << *cg;
    // Made below the pods' CPU priority, every thread of it.
    EXPECT_EQ(ThreadNices(pid), std::set<int>{kRefillNice}) << "pid " << pid;
  }

  std::string miss;
  auto claimed = pool->Claim(Shape{}, Self("sandbox-1"), &miss);
  ASSERT_OK(claimed);
  ASSERT_TRUE(claimed->has_value()) << miss;
  const Claimed c = **claimed;
  auto record = ReadPoolRecord(c.state_dir);
  ASSERT_OK(record);
  EXPECT_TRUE(record->claimed);
  EXPECT_EQ(record->sandbox_id, "sandbox-1");
  EXPECT_EQ(record->claimant.pid, ::getpid());
  EXPECT_FALSE(c.agent_stream) << "a pool given no hand-over socket keeps no agent streams";
  // A stream handed over that turned out dead (its peer gone): the
  // adoption dials the agent instead.
  int dead[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dead), 0);
  ::close(dead[1]);
  vm::SandboxVmPtr mine = AdoptClaimed(cfg_, c, UniqueFd(dead[0]));
  ASSERT_NE(mine, nullptr);
  // A claimed VM runs at the normal priority.
  for (pid_t pid : mine->HostPids()) EXPECT_EQ(ThreadNices(pid), std::set<int>{0}) << "pid " << pid;

  ASSERT_TRUE(ready(1)) << "the pool did not refill after the claim";
  st = pool->GetStatus();
  EXPECT_EQ(DefaultShape(st, key_)->claimed, 1u);
  EXPECT_EQ(DefaultShape(st, key_)->boots, 2u);

  // Claimed and never adopted (the claimant gave up): reaped after the grace.
  claimed = pool->Claim(Shape{}, Self("sandbox-2"), &miss);
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << miss;
  const std::string abandoned = (*claimed)->state_dir;
  EXPECT_TRUE(WaitUntil([&] { return !PathExists(abandoned); }, seconds(30))) << abandoned << " was never reaped";

  // A shape never asked for before: a miss that makes the pool keep it.
  claimed = pool->Claim(Shape{2, 384}, Self("sandbox-3"), &miss);
  ASSERT_OK(claimed);
  EXPECT_FALSE(claimed->has_value());
  EXPECT_NE(miss.find("from now on"), std::string::npos) << miss;
  EXPECT_EQ(pool->GetStatus().shapes.size(), 2u);

  EXPECT_OK(mine->Stop(milliseconds(2000)));
  pool->Drain();
  st = pool->GetStatus();
  for (const auto& sh : st.shapes) EXPECT_EQ(sh.ready + sh.booting, 0u) << sh.key;
  EXPECT_TRUE(st.draining);
  pool.reset();
  EXPECT_FALSE(PathExists("/sys/fs/cgroup/memory" + cfg_.pool.cgroup)) << "the pool's cgroup is removed with it";
  EXPECT_FALSE(PathExists("/sys/fs/cgroup/memory" + cfg_.pool.cgroup + "-refill")) << "and its refill group";
  EXPECT_FALSE(PathExists("/sys/fs/cgroup" + cfg_.pool.cgroup + "/cgroup.procs"));
}

TEST_F(WarmPoolVmTest, AKilledDaemonLeavesClaimedVmsRunningAndARestartReapsOnlyTheIdleOnes) {
  Status appended = WriteFile(env_->config_path(), *ReadFile(env_->config_path()) +
                                                       "pool:\n  size: 1\n  socket: " + cfg_.pool.socket +
                                                       "\n  cgroup: " + cfg_.pool.cgroup + "-d\n");
  ASSERT_OK(appended);
  auto daemon = testing::PoolDaemonProcess::Start(env_->config_path(), cfg_.pool.socket);
  ASSERT_OK(daemon);
  ASSERT_TRUE((*daemon)->WaitReady(1, kBootBudget).ok());

  auto reply = (*daemon)->client().Claim(Shape{}, key_, Self("sandbox-1"), milliseconds(5000));
  ASSERT_OK(reply);
  ASSERT_TRUE(reply->vm.has_value()) << reply->miss_reason;
  // The agent stream the daemon opened before the claim is ours alone,
  // once, and the guest set its side up before it paused (its settings
  // wait in the stream).
  ASSERT_TRUE(reply->vm->agent_stream) << "the daemon kept no agent stream for its claimant";
  const std::string streams = AgentStreamSocketFor(cfg_.pool.socket);
  auto stream = TakeAgentStream(streams, reply->vm->vm_id, milliseconds(2000));
  ASSERT_OK(stream);
  char byte;
  EXPECT_EQ(::recv(stream->get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT), 1) << "the agent has not spoken on it";
  EXPECT_EQ(TakeAgentStream(streams, reply->vm->vm_id, milliseconds(2000)).status().code(), Code::kNotFound);
  vm::SandboxVmPtr mine = AdoptClaimed(cfg_, *reply->vm, std::move(*stream));
  ASSERT_NE(mine, nullptr);
  auto refilled = (*daemon)->WaitReady(1, kBootBudget, /*settled=*/true);
  ASSERT_OK(refilled);

  // A wrong shape key (another kernel, say) is a miss, not a VM.
  auto wrong = (*daemon)->client().Claim(Shape{}, "0000000000000000", Self("sandbox-x"), milliseconds(5000));
  ASSERT_OK(wrong);
  EXPECT_FALSE(wrong->vm.has_value());
  EXPECT_NE(wrong->miss_reason.find("shape key"), std::string::npos) << wrong->miss_reason;

  std::vector<std::string> idle;  // the refilled VM's dir
  for (const auto& id : VmDirNames(cfg_.runtime.state_dir))
    if (id != mine->id()) idle.push_back(cfg_.runtime.state_dir + "/vm/" + id);
  ASSERT_EQ(idle.size(), 1u);
  const std::string tpl_dir = cfg_.runtime.state_dir + "/templates/" + key_;
  EXPECT_TRUE(PathExists(tpl_dir + "/template.json")) << "the daemon refills from a template by default";
  (*daemon)->Kill();
  EXPECT_TRUE(PathExists(idle[0])) << "SIGKILL leaves the idle VM for the next daemon";
  // The claimed VM is the claimant's: it keeps running without the daemon.
  auto agent = mine->agent();
  ASSERT_OK(agent);
  EXPECT_TRUE((*agent)->Check(milliseconds(5000)).ok()) << "the claimed VM died with the daemon";

  auto restarted = testing::PoolDaemonProcess::Start(env_->config_path(), cfg_.pool.socket);
  ASSERT_OK(restarted);
  auto reaped = (*restarted)->WaitForLog("an idle VM left by an earlier pool daemon", seconds(30));
  EXPECT_OK(reaped);
  EXPECT_TRUE(WaitUntil([&] { return !PathExists(idle[0]); }, seconds(30))) << idle[0] << " was not reaped";
  auto kept = (*restarted)->WaitForLog("serves shape " + key_, seconds(30));
  EXPECT_OK(kept) << "a restarted daemon reuses the current template: " << kept.status().ToString();
  EXPECT_TRUE((*agent)->Check(milliseconds(5000)).ok()) << "the restart must not touch a claimed, adopted VM";
  // (A shim would have moved its VM into its pod's cgroup; ours still sits
  // in the pool's, so it goes first.)
  EXPECT_OK(mine->Stop(milliseconds(2000)));
  (*restarted)->Stop();  // SIGTERM: drains, its refill boot included
  EXPECT_FALSE(PathExists("/sys/fs/cgroup/memory" + cfg_.pool.cgroup + "-d"))
      << "the restarted daemon removes the pool cgroup its killed predecessor made";
}

// The window between a claim's mark and its reply: the daemon dies there
// (a test build SIGKILLs itself at that point). The claimant sees a failed
// call, which the shim takes as a miss and boots cold; the VM, marked
// claimed for a live claimant that will never adopt it, is reaped by the
// next daemon once the claim grace has passed, and nothing is left.
TEST_F(WarmPoolVmTest, ADaemonKilledInsideTheClaimWindowFailsTheClaimAndTheNextDaemonReapsTheVm) {
  Status appended = WriteFile(env_->config_path(), *ReadFile(env_->config_path()) +
                                                       "pool:\n  size: 1\n  refill: boot\n  socket: " +
                                                       cfg_.pool.socket + "\n  cgroup: " + cfg_.pool.cgroup + "-w\n");
  ASSERT_OK(appended);
  const std::string program = std::string(std::getenv("CAPSULE_BUILD_DIR")) + "/tests/integration/pool/claim_window_poold";
  auto daemon = testing::PoolDaemonProcess::StartProgram({program, "--die-in-claim"}, env_->config_path(), cfg_.pool.socket);
  ASSERT_OK(daemon);
  ASSERT_TRUE((*daemon)->WaitReady(1, kBootBudget, /*settled=*/true).ok());
  const std::vector<std::string> before = VmDirNames(cfg_.runtime.state_dir);
  ASSERT_EQ(before.size(), 1u);
  const std::string dir = cfg_.runtime.state_dir + "/vm/" + before[0];

  auto reply = (*daemon)->client().Claim(Shape{}, key_, Self("sandbox-w"), milliseconds(5000));
  EXPECT_FALSE(reply.ok()) << "the daemon answered a claim it should have died in";
  if (!reply.ok()) {
    EXPECT_EQ(reply.status().code(), Code::kUnavailable) << reply.status().ToString();
  }
  ASSERT_TRUE((*daemon)->WaitForLog("dying inside the claim of " + before[0], seconds(10)).ok()) << (*daemon)->log();
  (*daemon)->Kill();  // reaps it
  auto record = ReadPoolRecord(dir);
  ASSERT_OK(record);
  EXPECT_TRUE(record->claimed);
  EXPECT_EQ(record->sandbox_id, "sandbox-w");
  auto text = ReadFile(hypervisor::VmPaths(dir).record());
  ASSERT_OK(text);
  auto vm_record = hypervisor::VmRecordFromJson(*text, "vm.json");
  ASSERT_OK(vm_record);
  EXPECT_EQ(::kill(vm_record->vmm.pid, 0), 0) << "the VM outlives the daemon that died claiming it";

  // The next daemon leaves the VM alone within the grace (its claimant,
  // this process, still lives), then reaps it; it refills its own.
  auto next = testing::PoolDaemonProcess::StartProgram({program, "--claim-grace-ms", "3000", "--scan-interval-ms", "500"},
                                                       env_->config_path(), cfg_.pool.socket);
  ASSERT_OK(next);
  auto reaped = (*next)->WaitForLog("for sandbox sandbox-w but never adopted", seconds(30));
  EXPECT_OK(reaped);
  EXPECT_TRUE(WaitUntil([&] { return !PathExists(dir); }, seconds(30))) << dir << " was not reaped";
  EXPECT_TRUE(WaitUntil([&] { return ::kill(vm_record->vmm.pid, 0) != 0; }, seconds(10))) << "its QEMU still runs";
  (*next)->Stop();  // SIGTERM: drains its refill
}

// ---- refill from a template ----

const ShapeStatus* WaitForShape(WarmPool& pool, const std::string& key,
                                const std::function<bool(const ShapeStatus&)>& pred, std::chrono::milliseconds timeout) {
  static thread_local PoolStatus last;
  const ShapeStatus* found = nullptr;
  WaitUntil(
      [&] {
        last = pool.GetStatus();
        found = DefaultShape(last, key);
        return found != nullptr && pred(*found);
      },
      timeout);
  return found != nullptr && pred(*found) ? found : nullptr;
}

TEST_F(WarmPoolVmTest, ATemplateFillsThePoolWithClonesAndStatusSaysSo) {
  WarmPoolOptions o;
  o.config = cfg_;
  o.config.pool.size = 2;
  o.config.pool.refill_holdback_ms = 1500;
  o.scan_interval = milliseconds(500);
  auto started = WarmPool::Start(o);
  ASSERT_OK(started);
  std::unique_ptr<WarmPool> pool = std::move(*started);
  const ShapeStatus* s = WaitForShape(*pool, key_, [](const ShapeStatus& x) { return x.ready >= 2; }, kBootBudget * 2);
  ASSERT_NE(s, nullptr) << "the pool never filled";
  EXPECT_EQ(s->refill, "template");
  EXPECT_EQ(s->template_key, key_);
  EXPECT_EQ(s->template_builds, 1u);
  EXPECT_EQ(s->clones, 2u);
  EXPECT_EQ(s->boots, 0u) << "no VM was cold-booted: " << s->template_last_failure;
  // Status reports both times; which is faster is vm_bench's to measure
  // (boot/clone), not a test's to assert: a loaded host reversed them once.
  EXPECT_GT(s->clone_p50_ms, 0.0);
  EXPECT_GT(s->template_build_ms, 0.0);
  EXPECT_TRUE(PathExists(cfg_.runtime.state_dir + "/templates/" + key_ + "/ram"));
  std::printf("template built in %.0f ms; clone p50 %.0f ms, last %.0f ms\n", s->template_build_ms, s->clone_p50_ms,
              s->clone_last_ms);

  std::string miss;
  const auto claimed_at = std::chrono::steady_clock::now();
  auto claimed = pool->Claim(Shape{}, Self("sandbox-c"), &miss);
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << miss;
  // The refill waits while the claimed VM's pod starts (a ready VM is left).
  PoolStatus held = pool->GetStatus();
  EXPECT_EQ(DefaultShape(held, key_)->refills_held_back, 1u);
  EXPECT_EQ(DefaultShape(held, key_)->booting, 0u) << "the refill started beside the claimed VM's pod";
  vm::SandboxVmPtr mine = AdoptClaimed(cfg_, **claimed);
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(mine->vmm().boot_devices().size(), cfg_.guest.boot_nic ? 1u : 0u)
      << "a clone boots with no device QEMU cannot migrate";
  s = WaitForShape(*pool, key_, [](const ShapeStatus& x) { return x.booting > 0 || x.clones >= 3; }, kBootBudget);
  ASSERT_NE(s, nullptr) << "the held-back refill never started";
  EXPECT_GE(std::chrono::steady_clock::now() - claimed_at, milliseconds(o.config.pool.refill_holdback_ms))
      << "the refill started before pool.refill_holdback_ms";
  EXPECT_EQ(s->refills_held_back, 0u);
  s = WaitForShape(*pool, key_, [](const ShapeStatus& x) { return x.ready >= 2 && x.clones >= 3; }, kBootBudget);
  EXPECT_NE(s, nullptr) << "the pool did not refill by clone after the claim";

  // Both ready VMs claimed: their refills wait too, until a claim finds
  // nothing ready; that claim starts them and takes a clone.
  std::vector<vm::SandboxVmPtr> more;
  for (const char* sandbox : {"sandbox-e", "sandbox-f"}) {
    claimed = pool->Claim(Shape{}, Self(sandbox), &miss);
    ASSERT_TRUE(claimed.ok() && claimed->has_value()) << miss;
    more.push_back(AdoptClaimed(cfg_, **claimed));
    ASSERT_NE(more.back(), nullptr);
  }
  held = pool->GetStatus();
  EXPECT_EQ(DefaultShape(held, key_)->ready, 0u);
  EXPECT_EQ(DefaultShape(held, key_)->booting, 0u);
  EXPECT_EQ(DefaultShape(held, key_)->refills_held_back, 2u);
  claimed = pool->Claim(Shape{}, Self("sandbox-g"), &miss);
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << "a claim on held-back refills got nothing: " << miss;
  more.push_back(AdoptClaimed(cfg_, **claimed));
  ASSERT_NE(more.back(), nullptr);
  held = pool->GetStatus();
  EXPECT_GT(DefaultShape(held, key_)->booting + DefaultShape(held, key_)->ready, 0u) << "the held-back refills never started";
  for (auto& v : more) EXPECT_OK(v->Stop(milliseconds(0)));

  // No ready VM and none on the way (resized to 0): the claim restores a
  // clone of its own from the template instead of sending the pod to a
  // cold boot.
  pool->Resize(0);
  s = WaitForShape(*pool, key_, [](const ShapeStatus& x) { return x.ready == 0 && x.booting == 0; }, kBootBudget);
  ASSERT_NE(s, nullptr);
  const uint32_t clones_before = s->clones;
  claimed = pool->Claim(Shape{}, Self("sandbox-d"), &miss);
  ASSERT_TRUE(claimed.ok() && claimed->has_value()) << "no clone was made for the claim: " << miss;
  vm::SandboxVmPtr own = AdoptClaimed(cfg_, **claimed);
  ASSERT_NE(own, nullptr) << "the claim's own clone does not answer";
  const PoolStatus after = pool->GetStatus();
  EXPECT_EQ(DefaultShape(after, key_)->clones, clones_before + 1);
  EXPECT_EQ(DefaultShape(after, key_)->claimed, 5u);
  EXPECT_OK(own->Stop(milliseconds(2000)));
  EXPECT_OK(mine->Stop(milliseconds(2000)));
  pool.reset();
  EXPECT_TRUE(env_->VmDirs().empty()) << ::testing::PrintToString(env_->VmDirs());
  EXPECT_TRUE(PathExists(cfg_.runtime.state_dir + "/templates/" + key_ + "/template.json"))
      << "a stopped pool keeps its template for the next daemon";
}

TEST_F(WarmPoolVmTest, AChangedInitrdOrShapeBuildsANewTemplateAndDeletesTheOld) {
  // The pool's own copy of the initrd, so the test can change it.
  const std::string initrd = env_->root() + "/initrd.img";
  auto image = ReadFile(cfg_.guest.initrd);
  ASSERT_OK(image);
  ASSERT_OK(WriteFile(initrd, *image));
  WarmPoolOptions o;
  o.config = cfg_;
  o.config.guest.initrd = initrd;
  o.scan_interval = milliseconds(500);
  auto first_key = ShapeKey(o.config, Resolve(o.config, Shape{}));
  ASSERT_OK(first_key);
  const std::string templates = cfg_.runtime.state_dir + "/templates/";
  {
    auto started = WarmPool::Start(o);
    ASSERT_OK(started);
    std::unique_ptr<WarmPool> pool = std::move(*started);
    ASSERT_NE(WaitForShape(*pool, *first_key, [](const ShapeStatus& x) { return x.ready >= 1 && x.clones >= 1; },
                           kBootBudget * 2),
              nullptr);
    ASSERT_TRUE(PathExists(templates + *first_key));

    // A rebuilt image (same path, new mtime): a new key, a new template.
    timespec later[2] = {{0, UTIME_OMIT}, {::time(nullptr) + 60, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, initrd.c_str(), later, 0), 0);
    auto second_key = ShapeKey(o.config, Resolve(o.config, Shape{}));
    ASSERT_OK(second_key);
    ASSERT_NE(*second_key, *first_key);
    const ShapeStatus* s = WaitForShape(
        *pool, *second_key, [](const ShapeStatus& x) { return x.ready >= 1 && !x.template_key.empty(); },
        kBootBudget * 2);
    ASSERT_NE(s, nullptr) << "the shape was not re-keyed and refilled";
    EXPECT_EQ(s->template_key, *second_key);
    EXPECT_FALSE(PathExists(templates + *first_key)) << "the old image's template is deleted";
    EXPECT_TRUE(PathExists(templates + *second_key + "/template.json"));
    EXPECT_EQ(env_->VmDirs().size(), 1u) << "the old image's idle VM was stopped: "
                                         << ::testing::PrintToString(env_->VmDirs());
  }
  // Another default shape (a restart with a new config): its own template,
  // the other one deleted at start.
  o.config.guest.default_memory_mib = 320;
  auto third_key = ShapeKey(o.config, Resolve(o.config, Shape{}));
  ASSERT_OK(third_key);
  auto started = WarmPool::Start(o);
  ASSERT_OK(started);
  std::unique_ptr<WarmPool> pool = std::move(*started);
  const ShapeStatus* s = WaitForShape(*pool, *third_key, [](const ShapeStatus& x) { return x.ready >= 1; },
                                      kBootBudget * 2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->template_key, *third_key);
  EXPECT_EQ(ListDir(templates), std::vector<std::string>{*third_key}) << "only the current shape's template is kept";
  pool.reset();
  EXPECT_TRUE(env_->VmDirs().empty());
}

// Pods of 7 other sizes register 7 shapes. All shapes together keep at
// most pool.max_idle VMs idle (the default shape's first), and the shapes
// no claim asks for again expire after pool.shape_expiry_s with what they
// had: only the default shape's VM is left.
TEST_F(WarmPoolVmTest, TenantSizedShapesShareOneCapOfIdleVmsAndExpire) {
  WarmPoolOptions o;
  o.config = cfg_;
  o.config.pool.refill = "boot";
  o.config.pool.max_parallel_boots = 3;
  o.config.pool.max_idle = 2;
  o.config.pool.shape_expiry_s = 4;
  auto started = WarmPool::Start(o);
  ASSERT_OK(started);
  std::unique_ptr<WarmPool> pool = std::move(*started);
  ASSERT_NE(WaitForShape(*pool, key_, [](const ShapeStatus& x) { return x.ready >= 1; }, kBootBudget), nullptr);
  for (uint32_t i = 0; i < 7; ++i) {
    std::string miss;
    auto c = pool->Claim(Shape{1, 288 + 32 * i}, Self("sized-" + std::to_string(i)), &miss);
    ASSERT_OK(c);
    EXPECT_FALSE(c->has_value()) << "a shape seen for the first time has no VM yet";
  }
  EXPECT_EQ(pool->GetStatus().shapes.size(), 8u);
  uint32_t most_idle = 0;
  bool expired = WaitUntil(
      [&] {
        PoolStatus st = pool->GetStatus();
        uint32_t idle = 0;
        for (const auto& s : st.shapes) idle += s.ready + s.booting;
        most_idle = std::max(most_idle, idle);
        return st.shapes.size() == 1 && st.shapes[0].key == key_;
      },
      kBootBudget);
  EXPECT_TRUE(expired) << "the tenant-sized shapes did not expire";
  EXPECT_LE(most_idle, 2u) << "more idle VMs than pool.max_idle";
  // Boots under way when their shape expired stop what they made.
  EXPECT_TRUE(WaitUntil([&] { return env_->VmDirs().size() == 1; }, kBootBudget))
      << ::testing::PrintToString(env_->VmDirs());
  pool.reset();
  EXPECT_TRUE(env_->VmDirs().empty());
}

TEST_F(WarmPoolVmTest, ACloneWhoseQemuIsKilledDuringItsRestoreLeavesNothingAndABootReplacesIt) {
  WarmPoolOptions o;
  o.config = cfg_;
  o.scan_interval = milliseconds(500);
  vm::testing::LogTap tap;
  auto started = WarmPool::Start(o);
  ASSERT_OK(started);
  std::unique_ptr<WarmPool> pool = std::move(*started);
  // The first clone, as soon as its QEMU waits for the template's state.
  ASSERT_TRUE(tap.WaitFor("waits for the state", kBootBudget * 2));
  std::vector<std::string> dirs = env_->VmDirs();
  ASSERT_EQ(dirs.size(), 1u) << ::testing::PrintToString(dirs);
  const std::string clone_dir = cfg_.runtime.state_dir + "/vm/" + dirs[0];
  auto text = ReadFile(hypervisor::VmPaths(clone_dir).record());
  ASSERT_OK(text);
  auto rec = hypervisor::VmRecordFromJson(*text, "vm.json");
  ASSERT_OK(rec);
  ASSERT_TRUE(rec->spec.incoming);
  ASSERT_EQ(::kill(rec->vmm.pid, SIGKILL), 0);

  const ShapeStatus* s =
      WaitForShape(*pool, key_, [](const ShapeStatus& x) { return x.ready >= 1 && x.clone_failures >= 1; }, kBootBudget);
  ASSERT_NE(s, nullptr) << "no VM replaced the failed clone";
  EXPECT_EQ(s->boots, 1u) << "a boot took the failed clone's place";
  EXPECT_NE(s->template_last_failure.find("clone"), std::string::npos) << s->template_last_failure;
  // The boot reuses the VM id (the failed restore removed all of its own).
  auto booted = ReadFile(hypervisor::VmPaths(clone_dir).record());
  ASSERT_OK(booted);
  auto brec = hypervisor::VmRecordFromJson(*booted, "vm.json");
  ASSERT_OK(brec);
  EXPECT_FALSE(brec->spec.incoming) << "the VM there now was booted";
  EXPECT_NE(brec->vmm.pid, rec->vmm.pid);
  EXPECT_NE(::kill(rec->vmm.pid, 0), 0) << "the killed clone's QEMU is gone";
  EXPECT_EQ(vm::testing::ChildrenOfUs().size(), 0u) << ::testing::PrintToString(vm::testing::ChildrenOfUs());
  EXPECT_EQ(vm::testing::MemfdsHeldByUs(), "");
  pool.reset();
  EXPECT_TRUE(env_->VmDirs().empty());
}

}  // namespace
}  // namespace capsule::pool
