// The locally built OCI images against a real containerd 1.6: `ctr images
// import` accepts all three, busybox runs `echo` under runc, the pause image
// exits 0 on SIGTERM, and the netadmin image's iptables (nft and legacy)
// adds and lists a NAT redirect in a privileged container's own netns. Also checks our shim socket address scheme against the
// address containerd's own runc shim wrote for the same container.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <regex>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"
#include "shim/launcher/socket.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/images/test_images.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kEventTimeout{30000};
constexpr const char* kNs = "k8s.io";

// `ctr events` as a child: lines "<time> <namespace> <topic> <json>".
class EventStream {
 public:
  static Result<EventStream> Start(const ContainerdHarness& ctrd) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
    UniqueFd r(p[0]), w(p[1]);
    SpawnOptions o;
    o.argv = ctrd.CtrArgv({"events"});
    o.stdout_fd = w.get();
    ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
    return EventStream(std::move(child), std::move(r));
  }
  // The first line with `topic` whose JSON mentions container `id`.
  Result<std::string> WaitFor(const std::string& topic, const std::string& id) {
    const auto deadline = std::chrono::steady_clock::now() + kEventTimeout;
    for (;;) {
      size_t nl;
      while ((nl = buf_.find('\n')) != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        if (line.find(" " + topic + " ") != std::string::npos &&
            line.find("\"container_id\":\"" + id + "\"") != std::string::npos)
          return line;
      }
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{r_.get(), POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1)
        return DeadlineExceeded("no " + topic + " event for " + id);
      char chunk[4096];
      ssize_t n = ::read(r_.get(), chunk, sizeof chunk);
      if (n <= 0) return Unavailable("ctr events ended");
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  EventStream(ChildProcess c, UniqueFd r) : child_(std::move(c)), r_(std::move(r)) {}
  ChildProcess child_;  // killed and reaped on destruction
  UniqueFd r_;
  std::string buf_;
};

class TestImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // No CRI: only ctr and runc are exercised here.
    auto c = ContainerdHarness::Start();
    ASSERT_OK(c);
    ctrd_ = std::move(*c);
    for (const char* image : {"busybox", "pause", "netadmin"}) {
      Status imported = ctrd_->ImportImage(TestImageTar(image), kNs);
      ASSERT_OK(imported);
    }
  }
  void TearDown() override {
    if (ctrd_) {
      auto leaks = ctrd_->Leaks();
      EXPECT_TRUE(leaks.empty()) << leaks.front();
    }
  }
  // `ctr -n k8s.io args...` that must succeed: its stdout.
  Result<std::string> Ctr(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"-n", kNs};
    argv.insert(argv.end(), args.begin(), args.end());
    return ctrd_->CtrOutput(argv);
  }
  std::unique_ptr<ContainerdHarness> ctrd_;
};

TEST_F(TestImagesTest, ImportedImagesAreListedWithThePlatform) {
  auto ls = Ctr({"images", "ls"});
  ASSERT_OK(ls);
  EXPECT_NE(ls->find(kBusyboxImage), std::string::npos) << *ls;
  EXPECT_NE(ls->find(kPauseImage), std::string::npos) << *ls;
  EXPECT_NE(ls->find(kNetadminImage), std::string::npos) << *ls;
  EXPECT_NE(ls->find("linux/amd64"), std::string::npos) << *ls;
  // containerd verified every digest and size on import and unpacked the
  // layers into snapshots; `check` re-reads them from the content store.
  auto check = Ctr({"images", "check"});
  ASSERT_OK(check);
  EXPECT_EQ(std::regex_search(*check, std::regex("complete \\(\\d+/\\d+\\)")), true) << *check;
  EXPECT_EQ(check->find("incomplete"), std::string::npos) << *check;
}

TEST_F(TestImagesTest, BusyboxRunsEchoAndAppletsUnderRunc) {
  auto out = Ctr({"run", "--rm", kBusyboxImage, "echo-1", "echo", "hello from busybox"});
  ASSERT_OK(out);
  EXPECT_EQ(*out, "hello from busybox\n");
  out = Ctr({"run", "--rm", kBusyboxImage, "applets-1", "sh", "-c",
                    "ls /usr/bin/env >/dev/null && id -un && stat -c %a /tmp && echo $PATH"});
  ASSERT_OK(out);
  EXPECT_EQ(*out, "root\n1777\n/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
}

TEST_F(TestImagesTest, NetadminHasIptablesWithItsLibrariesAndXtablesExtensions) {
  // The multi-call binaries, the Debian names linking to them, the
  // extensions REDIRECT and MASQUERADE rules load, and the busybox applets.
  auto out = Ctr({"run", "--rm", kNetadminImage, "netadmin-ls-1", "sh", "-c",
                  "cd /usr/sbin && for l in iptables iptables-save iptables-restore ip6tables "
                  "iptables-legacy iptables-legacy-save iptables-legacy-restore; do "
                  "echo $l $(readlink $l); done; "
                  "readlink /sbin/iptables; "
                  "cd /usr/lib/x86_64-linux-gnu/xtables && ls libxt_tcp.so libxt_udp.so "
                  "libxt_standard.so libxt_comment.so libxt_NAT.so libxt_REDIRECT.so "
                  "libxt_MASQUERADE.so libipt_icmp.so; "
                  "test -f /lib/x86_64-linux-gnu/libc.so.6 && test -f /etc/protocols && "
                  "test -x /lib64/ld-linux-x86-64.so.2 && ls /bin/busybox /usr/bin/env"});
  ASSERT_OK(out);
  EXPECT_EQ(*out,
            "iptables xtables-nft-multi\n"
            "iptables-save xtables-nft-multi\n"
            "iptables-restore xtables-nft-multi\n"
            "ip6tables xtables-nft-multi\n"
            "iptables-legacy xtables-legacy-multi\n"
            "iptables-legacy-save xtables-legacy-multi\n"
            "iptables-legacy-restore xtables-legacy-multi\n"
            "../usr/sbin/iptables\n"
            "libipt_icmp.so\nlibxt_MASQUERADE.so\nlibxt_NAT.so\nlibxt_REDIRECT.so\n"
            "libxt_comment.so\nlibxt_standard.so\nlibxt_tcp.so\nlibxt_udp.so\n"
            "/bin/busybox\n/usr/bin/env\n");

  // Privileged, in the netns ctr gives the container (not the host's): the
  // rule lands in nf_tables, the libraries resolve without an ld.so.cache,
  // and iptables-legacy runs too.
  out = Ctr({"run", "--rm", "--privileged", kNetadminImage, "netadmin-nat-1", "sh", "-c",
             "iptables -t nat -A OUTPUT -p tcp --dport 8081 -j REDIRECT --to-ports 8080 && "
             "iptables -t nat -A POSTROUTING -p udp -m comment --comment t -j MASQUERADE && "
             "iptables -t nat -S && iptables -t nat -L -n >/dev/null && "
             "iptables -V && iptables-legacy -V && iptables-legacy -t nat -L -n >/dev/null"});
  ASSERT_OK(out);
  EXPECT_NE(out->find("-A OUTPUT -p tcp -m tcp --dport 8081 -j REDIRECT --to-ports 8080\n"),
            std::string::npos) << *out;
  EXPECT_NE(out->find("-A POSTROUTING -p udp -m comment --comment t -j MASQUERADE\n"),
            std::string::npos) << *out;
  EXPECT_NE(out->find("(nf_tables)"), std::string::npos) << *out;
  EXPECT_NE(out->find("(legacy)"), std::string::npos) << *out;
}

TEST_F(TestImagesTest, PauseExitsZeroOnSigtermAndRuncShimAddressMatchesOurs) {
  auto events = EventStream::Start(*ctrd_);
  ASSERT_OK(events);
  auto run = Ctr({"run", "-d", kPauseImage, "pause-1"});
  ASSERT_OK(run);
  ASSERT_OK(events->WaitFor("/tasks/start", "pause-1"));

  // containerd's runc shim computed its socket address the way our launcher
  // does (runtime/v2/shim/util_unix.go): compare for the same inputs.
  auto address = ReadFile(ctrd_->state() + "/io.containerd.runtime.v2.task/" + std::string(kNs) + "/pause-1/address");
  ASSERT_OK(address);
  EXPECT_EQ(*address, shim::launcher::SocketAddress(ctrd_->grpc_address(), kNs, "pause-1",
                                                    shim::launcher::kDefaultSocketDir));

  ASSERT_OK(Ctr({"task", "kill", "--signal", "SIGTERM", "pause-1"}));
  auto exit = events->WaitFor("/tasks/exit", "pause-1");
  ASSERT_OK(exit);
  // TaskExit's JSON leaves out a zero exit_status.
  EXPECT_EQ(exit->find("exit_status"), std::string::npos) << *exit;
  EXPECT_OK(Ctr({"task", "rm", "pause-1"}));
  EXPECT_OK(Ctr({"containers", "rm", "pause-1"}));
}

bool WaitHandled(pid_t pid, int sig) {
  const auto deadline = std::chrono::steady_clock::now() + kEventTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto status = ReadFile("/proc/" + std::to_string(pid) + "/status");
    if (!status.ok()) return false;
    size_t pos = status->find("SigCgt:\t");
    if (pos != std::string::npos) {
      unsigned long long mask = std::stoull(status->substr(pos + 8, 16), nullptr, 16);
      if (mask & (1ULL << (sig - 1))) return true;
    }
    std::this_thread::yield();
  }
  return false;
}

TEST(PauseBinaryTest, ExitsZeroOnSigtermAndInt) {
  const char* build = std::getenv("CAPSULE_BUILD_DIR");
  ASSERT_NE(build, nullptr);
  for (int sig : {SIGTERM, SIGINT}) {
    SpawnOptions o;
    o.argv = {std::string(build) + "/tests/support/images/pause"};
    auto child = ChildProcess::Spawn(o);
    ASSERT_OK(child);
    // Send only once pause handles the signals (SigCgt in /proc), else the
    // default action would kill it before its sigwaitinfo loop runs.
    ASSERT_TRUE(WaitHandled(child->pid(), sig)) << "pause never set up signal " << sig;
    ASSERT_OK(child->Signal(sig));
    auto st = child->Wait(milliseconds(10000));
    ASSERT_OK(st);
    EXPECT_EQ(ExitCode(*st), 0) << "signal " << sig;
  }
}

}  // namespace
}  // namespace capsule::testing
