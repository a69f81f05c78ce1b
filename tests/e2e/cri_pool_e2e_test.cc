// CRI pods and the warm pool, through a real containerd 1.6 and real QEMU:
// with capsule-poold running (refilling from a template, the default),
// RunPodSandbox takes a pooled VM, a clone restored from the template (the
// shim's log says so, the pool's Status counts the claim and the clones,
// the VM's record says it was restored), its agent is reached on the
// stream the daemon opened before the claim, its clock is set and its RNG
// reseeded (as the pool readied it, and again at the claim) before
// anything runs, its NIC's IPv6 link-local address is from the pod's MAC
// (not the template's), and the pod serves HTTP on its CNI IP; a
// SIGKILLed daemon leaves the claimed pod working and a restarted one reaps
// the idle VM it left; without a daemon a pod still starts, cold. A pooled VM
// that idled paused for over a minute gets the host's clock at claim. The
// fixture's leak check runs after the pool daemon was stopped (drained).
#include <time.h>

#include <cstdio>
#include <thread>

#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using std::chrono::seconds;
constexpr seconds kBootBudget{120};

class CriPoolE2eTest : public CriPoolFixture {
 protected:
  void TearDown() override {
    const std::string left = StopPool();
    if (!env_) return;  // SetUp failed before the environment existed
    // The pool's own cgroup goes with it.
    EXPECT_TRUE(left.empty()) << left << " was left";
    CriE2eTest::TearDown();
  }
};

TEST_F(CriPoolE2eTest, APodTakesAPooledVmSurvivesTheDaemonsDeathAndStartsColdWithoutIt) {
  StartPool();
  ASSERT_OK(pool_->WaitReady(1, kBootBudget));
  const v1::PodSandboxConfig pod = Pod("capsule-warm", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  // The sandbox's last line of its start; the others come before it.
  auto ready = ctrd_->WaitForLog("sandbox " + *pod_id + " ready in VM", seconds(10));
  ASSERT_OK(ready);
  std::string log = *ready;
  EXPECT_NE(log.find("sandbox " + *pod_id + ": claimed pooled VM"), std::string::npos) << "the pod cold-booted";
  EXPECT_NE(log.find("its agent stream taken from the pool"), std::string::npos)
      << "the shim dialled the agent instead of taking the pool's stream";
  EXPECT_NE(log.find("on the stream handed over"), std::string::npos)
      << "the stream the pool handed over did not carry the adoption's Check";
  // Twice: as the pool readied it (its rehearsal), and at the claim.
  EXPECT_NE(log.find("reseed 2 since its boot"), std::string::npos) << "the claimed VM's RNG was not reseeded";
  EXPECT_NE(log.find("(boot NIC, taken over in"), std::string::npos) << "the pooled VM's boot NIC was not taken over";
  EXPECT_OK(pool_->WaitForLog("with the boot NIC's take-over", seconds(10)))
      << "the pooled VM was offered without its rehearsal: " << pool_->log();
  EXPECT_OK(pool_->WaitForLog("mounted ahead of the pod: /run/capsule/shared, /run/capsule/pod-shm", seconds(10)))
      << pool_->log();
  auto st = pool_->Status();
  ASSERT_OK(st);
  ASSERT_FALSE(st->shapes.empty());
  EXPECT_EQ(st->shapes[0].claimed, 1u);
  EXPECT_EQ(st->shapes[0].refill, "template") << st->shapes[0].template_last_failure;
  EXPECT_GE(st->shapes[0].clones, 1u);
  EXPECT_EQ(st->shapes[0].boots, 0u) << "every pool VM was a clone: " << st->shapes[0].template_last_failure;
  ExpectVmmInPodCgroup(*pod_id);  // a pooled VM leaves the pool's cgroup at claim

  auto c1 = StartContainer(*pod_id, pod, "web",
                           {"sh", "-c",
                            fmt::format("mkdir -p /tmp/www; echo warm-pod > /tmp/www/index.html; "
                                        "exec httpd -f -p {} -h /tmp/www",
                                        kHttpPort)});
  ASSERT_OK(c1);
  auto pstatus = cri_->PodStatus(*pod_id);
  ASSERT_OK(pstatus);
  const std::string ip = pstatus->status().network().ip();
  Result<std::string> page = Unavailable("not tried");
  for (int i = 0; i < 100; ++i) {
    page = HttpGet(ip, kHttpPort, milliseconds(5000));
    if (page.ok() || page.status().code() == Code::kDeadlineExceeded) break;
    ::usleep(300 * 1000);
  }
  ASSERT_OK(page);
  EXPECT_NE(page->find("warm-pod"), std::string::npos) << *page;

  // SIGKILL with this pod's VM claimed and (once refilled) one idling.
  ASSERT_OK(pool_->WaitReady(1, kBootBudget, /*settled=*/true));
  pool_->Kill();
  // The clone's kernel RNG and identity are its own (vmgenid, the claim's
  // reseed): readable from a container like on any node.
  auto random = cri_->ExecSync(*c1, {"sh", "-c", "head -c 16 /dev/urandom | od -An -tx1; cat /proc/sys/kernel/random/boot_id"}, 30);
  ASSERT_OK(random);
  EXPECT_EQ(random->exit_code, 0) << random->err;
  EXPECT_GT(random->out.size(), 40u) << random->out;
  // The boot NIC idled with the template's MAC, the same in every clone;
  // its IPv6 link-local address is the pod's own, from the pod's MAC (EUI-64).
  auto nic = cri_->ExecSync(*c1, {"sh", "-c", "cat /sys/class/net/eth0/address; cat /proc/net/if_inet6"}, 30);
  ASSERT_OK(nic);
  ASSERT_EQ(nic->exit_code, 0) << nic->err;
  unsigned b[6] = {};
  ASSERT_EQ(std::sscanf(nic->out.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]), 6)
      << nic->out;
  const std::string link_local = fmt::format("fe80000000000000{:02x}{:02x}{:02x}fffe{:02x}{:02x}{:02x}", b[0] ^ 2u,
                                             b[1], b[2], b[3], b[4], b[5]);
  EXPECT_NE(nic->out.find(link_local), std::string::npos) << "eth0's link-local is not from its MAC:\n" << nic->out;
  // The pod's /dev/shm, mounted before the claim, is the pod's tmpfs of
  // the CRI size, and writable.
  auto shm = cri_->ExecSync(*c1, {"sh", "-c", "echo s > /dev/shm/f && cat /dev/shm/f && df -k /dev/shm | tail -1"}, 30);
  ASSERT_OK(shm);
  EXPECT_EQ(shm->exit_code, 0) << shm->err;
  EXPECT_TRUE(shm->out.starts_with("s\nshm ")) << shm->out;  // "shm": the pod tmpfs's source
  EXPECT_NE(shm->out.find(" 65536 "), std::string::npos) << shm->out;
  auto exec = cri_->ExecSync(*c1, {"echo", "still-here"}, 30);
  ASSERT_OK(exec);
  EXPECT_EQ(exec->out, "still-here\n");
  StartPool();
  EXPECT_OK(pool_->WaitForLog("an idle VM left by an earlier pool daemon", seconds(30))) << pool_->log();
  exec = cri_->ExecSync(*c1, {"echo", "after-restart"}, 30);
  ASSERT_OK(exec);
  pool_->Stop();  // drains; its socket goes

  const v1::PodSandboxConfig cold = Pod("capsule-cold", v1::POD);
  auto cold_id = RunPod(cold);
  ASSERT_OK(cold_id);
  ready = ctrd_->WaitForLog("sandbox " + *cold_id + " ready in VM", seconds(10));
  ASSERT_OK(ready);
  log = *ready;
  const size_t at = log.find("sandbox " + *cold_id + ": cold-booting VM");
  ASSERT_NE(at, std::string::npos) << "no cold-boot line for the pod started without a daemon";
  EXPECT_NE(log.find("no pool daemon", at), std::string::npos) << log.substr(at, 400);
  auto c2 = StartContainer(*cold_id, cold, "one", {"sleep", "3600"});
  ASSERT_OK(c2);

  for (const auto& id : {*pod_id, *cold_id}) {
    ASSERT_OK(cri_->StopPod(id));
    ASSERT_OK(cri_->RemovePod(id));
  }
}

// Nothing in QEMU corrects the wall clock of a guest that sat paused: the
// claim must set it, or a pod's clock is as far behind as its VM idled. The
// pool pauses a VM as soon as it is ready, so an idle of a few seconds puts
// an unset clock that far behind, well past the check's one second.
TEST_F(CriPoolE2eTest, AVmThatIdledPausedGetsTheHostsClockAtClaim) {
  StartPool();
  ASSERT_OK(pool_->WaitReady(1, kBootBudget, /*settled=*/true));
  std::this_thread::sleep_for(seconds(6));
  const v1::PodSandboxConfig pod = Pod("capsule-clock", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  ASSERT_OK(ctrd_->WaitForLog("sandbox " + *pod_id + ": claimed pooled VM", seconds(10))) << "the pod cold-booted";
  auto c1 = StartContainer(*pod_id, pod, "one", {"sleep", "3600"});
  ASSERT_OK(c1);
  const time_t before = ::time(nullptr);
  auto exec = cri_->ExecSync(*c1, {"date", "+%s"}, 30);
  const time_t after = ::time(nullptr);
  ASSERT_OK(exec);
  const long guest = std::atol(exec->out.c_str());
  EXPECT_GE(guest, before - 1) << "guest clock " << exec->out << " behind the host's " << before;
  EXPECT_LE(guest, after + 1) << "guest clock " << exec->out << " ahead of the host's " << after;
  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

}  // namespace
}  // namespace capsule::testing
