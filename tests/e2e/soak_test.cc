// The soak (`make soak`; a short form runs in `make test-integration`):
// rounds of K CRI pods (CAPSULE_SOAK_PODS, at least 4) on one containerd,
// booted at once, each with a container that logs, an ExecSync into it, its
// log read back, then every pod stopped and removed, until
// CAPSULE_SOAK_SECONDS have passed (and at least two rounds ran). It samples
// containerd's and the shims' open fds and RSS, the host's mount table, its
// network links and our processes before, while the pods run, and after each
// round, prints them as a table, and fails when what should come back to
// where it was does not: no process, mount, link or VM dir of ours after a
// round, containerd's fds back within a small slack of the first round's,
// each round's shims no larger in fds than the first round's. RSS is
// reported, not asserted (containerd's Go heap grows and shrinks on its own
// schedule); the figures go in the issue notes.
#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;

int EnvInt(const char* name, int fallback, int min) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::max(min, std::atoi(v));
}

size_t CountDir(const std::string& dir) { return ListDir(dir).size(); }

long RssKib(pid_t pid) {
  auto status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  if (!status.ok()) return 0;
  const size_t at = status->find("VmRSS:");
  return at == std::string::npos ? 0 : std::atol(status->c_str() + at + 6);
}

size_t CountLines(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? static_cast<size_t>(std::count(text->begin(), text->end(), '\n')) : 0;
}

struct Sample {
  std::string when;
  size_t containerd_fds = 0;
  long containerd_rss_kib = 0;
  size_t shims = 0;
  size_t shim_fds_max = 0;
  long shim_rss_kib_max = 0;
  size_t mounts = 0;
  size_t links = 0;
  size_t vmms = 0;
};

class SoakTest : public CriE2eTest {
 protected:
  Sample Take(const std::string& when) {
    Sample s;
    s.when = when;
    const pid_t ctrd = ctrd_->pid();
    s.containerd_fds = CountDir("/proc/" + std::to_string(ctrd) + "/fd");
    s.containerd_rss_kib = RssKib(ctrd);
    for (const auto& [pid, cmd] : E2eEnv::Processes({"capsule-shimd"})) {
      if (cmd.find(ctrd_->grpc_address()) == std::string::npos) continue;
      ++s.shims;
      s.shim_fds_max = std::max(s.shim_fds_max, CountDir("/proc/" + std::to_string(pid) + "/fd"));
      s.shim_rss_kib_max = std::max(s.shim_rss_kib_max, RssKib(pid));
    }
    s.mounts = CountLines("/proc/self/mountinfo");
    s.links = CountDir("/sys/class/net");
    s.vmms = E2eEnv::Processes({env_->state_dir() + "/vm/"}).size();
    samples_.push_back(s);
    return s;
  }
  void Print() const {
    std::printf("\n%-22s %8s %10s %6s %9s %11s %7s %6s %6s\n", "sample", "ctrd fd", "ctrd RSS", "shims",
                "shim fd", "shim RSS", "mounts", "links", "ours");
    for (const Sample& s : samples_)
      std::printf("%-22s %8zu %7.1f MB %6zu %9zu %8.1f MB %7zu %6zu %6zu\n", s.when.c_str(), s.containerd_fds,
                  s.containerd_rss_kib / 1024.0, s.shims, s.shim_fds_max, s.shim_rss_kib_max / 1024.0, s.mounts,
                  s.links, s.vmms);
    std::fflush(stdout);
  }

  // One pod: a container that logs a line a second, an exec into it, the
  // log read back. Returns what went wrong, or "".
  std::string OnePod(int round, int i, std::mutex& mu, std::vector<std::string>& ids) {
    const std::string name = fmt::format("soak-{}-{}", round, i);
    const v1::PodSandboxConfig pod = Pod(name, v1::POD);
    auto id = cri_->RunPod(pod, "capsule");
    if (!id.ok()) return name + ": RunPodSandbox: " + id.status().ToString();
    {
      std::lock_guard<std::mutex> l(mu);
      ids.push_back(*id);
      pods_.push_back(*id);
    }
    auto c = StartContainer(*id, pod, name,
                            {"sh", "-c", fmt::format("while true; do echo tick-{}; sleep 1; done", name)});
    if (!c.ok()) return name + ": start container: " + c.status().ToString();
    auto exec = cri_->ExecSync(*c, {"sh", "-c", "echo exec-$((6*7))"}, 60);
    if (!exec.ok()) return name + ": ExecSync: " + exec.status().ToString();
    if (exec->out != "exec-42\n" || exec->exit_code != 0)
      return fmt::format("{}: ExecSync printed '{}' and exited {}", name, exec->out, exec->exit_code);
    for (int tries = 0; tries < 100; ++tries) {
      auto log = ReadFile(logs_ + "/" + name + ".log");
      if (log.ok() && log->find(" stdout F tick-" + name) != std::string::npos) return "";
      ::usleep(100 * 1000);
    }
    return name + ": its log never showed a tick";
  }

  std::vector<Sample> samples_;  // before, then each round: running, removed
};

TEST_F(SoakTest, PodsCreatedExecdLoggedAndRemovedInALoopLeaveTheHostFlat) {
  const int pods = EnvInt("CAPSULE_SOAK_PODS", 4, 4);
  const auto budget = std::chrono::seconds(EnvInt("CAPSULE_SOAK_SECONDS", 120, 1));
  std::printf("soak: %d pods a round for %lld s (CAPSULE_SOAK_PODS, CAPSULE_SOAK_SECONDS)\n", pods,
              static_cast<long long>(budget.count()));
  const Sample before = Take("before");
  const auto start = Clock::now();
  int round = 0;
  for (; round < 2 || Clock::now() - start < budget; ++round) {
    const auto round_start = Clock::now();
    std::mutex mu;
    std::vector<std::string> ids;
    std::vector<std::string> errors(static_cast<size_t>(pods));
    std::vector<std::thread> threads;
    for (int i = 0; i < pods; ++i)
      threads.emplace_back([&, i] { errors[static_cast<size_t>(i)] = OnePod(round, i, mu, ids); });
    for (auto& t : threads) t.join();
    const Sample during = Take(fmt::format("round {} running", round));
    for (const auto& e : errors) EXPECT_EQ(e, "");
    EXPECT_EQ(during.shims, static_cast<size_t>(pods)) << "one shim per pod";
    for (const auto& id : ids) {
      EXPECT_OK(cri_->StopPod(id)) << id;
      EXPECT_OK(cri_->RemovePod(id)) << id;
    }
    const auto leaks = LeaksAfterExit();
    EXPECT_TRUE(leaks.empty()) << "round " << round << ": " << leaks.size() << " leaks, first: " << leaks.front();
    const Sample after = Take(fmt::format("round {} removed", round));
    std::printf("soak: round %d took %.1f s\n", round,
                std::chrono::duration<double>(Clock::now() - round_start).count());
    EXPECT_EQ(after.shims, 0u);
    EXPECT_EQ(after.vmms, 0u);
    EXPECT_EQ(after.mounts, before.mounts) << "round " << round << " left mounts";
    // The first pod's CNI ADD makes the test bridge, which stays; every pod's
    // veth and tap must go.
    EXPECT_LE(after.links, before.links + 1) << "round " << round << " left network links";
    if (round > 0) {
      EXPECT_EQ(after.links, samples_[2].links) << "round " << round << " left network links";
    }
    if (HasFailure()) break;
  }
  Print();
  ASSERT_FALSE(HasFailure());
  // containerd keeps a few fds of its own (CRI's event streams, the
  // shims' log fifos close asynchronously): flat means within a small
  // slack of where the first round left it, not growing with the rounds.
  const Sample& first_after = samples_[2];
  const Sample& last_after = samples_.back();
  EXPECT_LE(last_after.containerd_fds, first_after.containerd_fds + 8)
      << "containerd's fds grew over " << round << " rounds";
  const Sample& first_during = samples_[1];
  for (size_t i = 1; i < samples_.size(); i += 2)
    EXPECT_LE(samples_[i].shim_fds_max, first_during.shim_fds_max + 8) << samples_[i].when;
}

}  // namespace
}  // namespace capsule::testing
