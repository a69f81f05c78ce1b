// Whole-process launcher tests: run capsule-test-shim (the real launcher with
// a trivial serve hook) as containerd would, with stdout+stderr on one pipe,
// and check the protocol: exactly the address, a detached daemon, one daemon
// per pod group, runtime options handed on, delete's DeleteResponse, and
// that no daemon, socket or FIFO is left behind.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "containerd/task/v2/shim.pb.h"
#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"
#include "shim/launcher/runtime_options.h"
#include "shim/launcher/socket.h"
#include "tests/support/status_matchers.h"

extern char** environ;

namespace capsule::shim::launcher {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kProcessTimeout{20000};
constexpr const char* kContainerdAddress = "/run/containerd-test/containerd.sock";
constexpr const char* kTtrpcAddress = "/run/containerd-test/containerd.sock.ttrpc";

struct RunResult {
  int exit_code = -1;
  std::string out;      // stdout (and stderr when combined)
  std::string err;      // stderr when separate
  bool out_eof = false; // the output pipe reached EOF in time
};

// Reads `fd` until EOF or the deadline.
bool ReadToEof(int fd, std::string* out, std::chrono::steady_clock::time_point deadline) {
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0;
    out->append(buf, static_cast<size_t>(n));
  }
}

std::map<std::string, std::string> ParseInfo(const std::string& text) {
  std::map<std::string, std::string> kv;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    if (size_t eq = line.find('='); eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    pos = nl + 1;
  }
  return kv;
}

// One request line to the test daemon's socket; the whole reply.
Result<std::string> Ask(const std::string& socket_path, const std::string& line) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return ErrnoStatus("connect " + socket_path);
  std::string req = line + "\n";
  if (::write(fd.get(), req.data(), req.size()) != static_cast<ssize_t>(req.size()))
    return ErrnoStatus("write");
  std::string reply;
  if (!ReadToEof(fd.get(), &reply, std::chrono::steady_clock::now() + kProcessTimeout))
    return DeadlineExceeded("no reply from " + socket_path);
  return reply;
}

class LauncherProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Daemons that `start` forks are re-parented to us when start exits, so
    // the test can reap them and prove none is left.
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    auto dir = TempDir::Create("shimproc");
    ASSERT_OK(dir);
    dir_ = std::make_unique<TempDir>(std::move(*dir));
    socket_dir_ = dir_->Join("s");
  }

  void TearDown() override {
    for (pid_t pid : daemons_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    // Every child (start processes, daemons) is reaped: nothing leaked.
    EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
    for (int fd : log_readers_) ::close(fd);
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
  }

  // A bundle like containerd's: config.json, a log FIFO whose read end we
  // hold open as containerd does (O_RDWR|O_NONBLOCK).
  std::string MakeBundle(const std::string& id, const std::string& sandbox_id) {
    const std::string bundle = dir_->Join("bundles/" + id);
    EXPECT_OK(MkdirAll(bundle));
    std::string config = R"({"ociVersion":"1.0.2")";
    if (!sandbox_id.empty())
      config += R"(,"annotations":{"io.kubernetes.cri.sandbox-id":")" + sandbox_id + "\"}";
    config += "}";
    EXPECT_OK(WriteFile(bundle + "/config.json", config));
    EXPECT_EQ(::mkfifo((bundle + "/log").c_str(), 0700), 0);
    int fd = ::open((bundle + "/log").c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    log_readers_.push_back(fd);
    log_fd_[bundle] = fd;
    return bundle;
  }

  std::string DrainLog(const std::string& bundle) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(log_fd_[bundle], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    return text;
  }

  std::vector<std::string> Env() const {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back(std::string(kSocketDirEnv) + "=" + socket_dir_);
    env.push_back(std::string("TTRPC_ADDRESS=") + kTtrpcAddress);
    return env;
  }

  // Runs the shim in `cwd` with `args`; stdout+stderr on one pipe unless
  // `separate_stderr`.
  RunResult Run(const std::vector<std::string>& args, const std::string& cwd,
                const std::string& stdin_data = "", bool separate_stderr = false) {
    RunResult res;
    int out[2], err[2], in[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    UniqueFd out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]), in_r(in[0]), in_w(in[1]);
    SpawnOptions o;
    o.argv = {CAPSULE_TEST_SHIM};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = Env();
    o.cwd = cwd;
    o.stdin_fd = in_r.get();
    o.stdout_fd = out_w.get();
    o.stderr_fd = separate_stderr ? err_w.get() : out_w.get();
    auto child = ChildProcess::Spawn(o);
    EXPECT_OK(child);
    if (!child.ok()) return res;
    out_w.reset();
    err_w.reset();
    in_r.reset();
    EXPECT_EQ(::write(in_w.get(), stdin_data.data(), stdin_data.size()),
              static_cast<ssize_t>(stdin_data.size()));
    in_w.reset();
    const auto deadline = std::chrono::steady_clock::now() + kProcessTimeout;
    res.out_eof = ReadToEof(out_r.get(), &res.out, deadline);
    if (separate_stderr) ReadToEof(err_r.get(), &res.err, deadline);
    auto st = child->Wait(kProcessTimeout);
    EXPECT_OK(st);
    if (st.ok()) res.exit_code = ExitCode(*st);
    return res;
  }

  std::vector<std::string> StartArgs(const std::string& id) const {
    return {"-namespace", "k8s.io", "-address", kContainerdAddress, "-publish-binary",
            "/usr/bin/containerd", "-id", id, "start"};
  }

  // Runs start and records the daemon it reports, for clean-up.
  RunResult Start(const std::string& id, const std::string& bundle, const std::string& stdin_data = "") {
    RunResult r = Run(StartArgs(id), bundle, stdin_data);
    if (r.exit_code == 0) {
      auto info = Info(r.out);
      if (!info.empty()) daemons_.insert(std::stoi(info["pid"]));
    }
    return r;
  }

  std::map<std::string, std::string> Info(const std::string& address) {
    auto path = SocketPathFromAddress(address);
    if (!path.ok()) return {};
    auto reply = Ask(*path, "info");
    EXPECT_OK(reply);
    return reply.ok() ? ParseInfo(*reply) : std::map<std::string, std::string>{};
  }

  // Waits for a daemon (our child via the subreaper) to exit; its status.
  int WaitDaemon(pid_t pid) {
    auto pidfd = OpenPidfd(pid);
    EXPECT_OK(pidfd);
    pollfd p{pidfd->get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, static_cast<int>(kProcessTimeout.count())), 1) << "daemon " << pid << " still running";
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    daemons_.erase(pid);
    return status;
  }

  bool SocketDirEmpty() const {
    DIR* d = ::opendir(socket_dir_.c_str());
    if (d == nullptr) return true;
    int n = 0;
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
    }
    ::closedir(d);
    return n == 0;
  }

  std::unique_ptr<TempDir> dir_;
  std::string socket_dir_;
  std::set<pid_t> daemons_;
  std::vector<int> log_readers_;
  std::map<std::string, int> log_fd_;
};

TEST_F(LauncherProcessTest, StartPrintsOnlyTheAddressAndDetachesTheDaemon) {
  const std::string bundle = MakeBundle("c1", "pod1");
  RunResult r = Start("c1", bundle);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The output pipe reached EOF although the daemon lives on: it holds no
  // copy of start's stdout/stderr.
  EXPECT_TRUE(r.out_eof);
  const std::string want = SocketAddress(kContainerdAddress, "k8s.io", "pod1", socket_dir_);
  EXPECT_EQ(r.out, want);  // exactly the address: no newline, no log line
  EXPECT_EQ(*ReadFile(bundle + "/address"), want);

  auto info = Info(r.out);
  ASSERT_FALSE(info.empty());
  const pid_t pid = std::stoi(info["pid"]);
  EXPECT_EQ(info["sid"], info["pid"]) << "daemon must lead its own session";
  EXPECT_EQ(info["ppid"], std::to_string(::getpid())) << "re-parented to the subreaper (us)";
  EXPECT_EQ(info["ns"], "k8s.io");
  EXPECT_EQ(info["id"], "c1");
  EXPECT_EQ(info["bundle"], bundle);
  EXPECT_EQ(info["cwd"], bundle);
  EXPECT_EQ(info["address"], kContainerdAddress);
  EXPECT_EQ(info["ttrpc"], kTtrpcAddress);
  EXPECT_EQ(info["publish"], "/usr/bin/containerd");
  EXPECT_EQ(info["config"], "");
  // The daemon is the serving binary beside the one containerd ran.
  char exe[512] = "";
  ASSERT_GT(::readlink(fmt::format("/proc/{}/exe", pid).c_str(), exe, sizeof exe - 1), 0);
  EXPECT_EQ(std::string(exe), std::string(CAPSULE_TEST_SHIM) + "d");

  const std::string sock = *SocketPathFromAddress(want);
  EXPECT_EQ(info["socket"], sock);
  struct stat st{};
  ASSERT_EQ(::stat(sock.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The daemon's stdio: /dev/null, and stderr on the bundle's log FIFO.
  char target[256] = "";
  ssize_t n = ::readlink(fmt::format("/proc/{}/fd/1", pid).c_str(), target, sizeof target - 1);
  ASSERT_GT(n, 0);
  EXPECT_STREQ(target, "/dev/null");
  // The listening socket arrived at fd 3, as with containerd's own shims.
  std::memset(target, 0, sizeof target);
  ASSERT_GT(::readlink(fmt::format("/proc/{}/fd/3", pid).c_str(), target, sizeof target - 1), 0);
  EXPECT_EQ(std::string(target).rfind("socket:[", 0), 0u) << target;

  const std::string log = DrainLog(bundle);
  EXPECT_NE(log.find("started shim daemon pid " + info["pid"]), std::string::npos) << log;
  EXPECT_NE(log.find("shim daemon pid " + info["pid"] + " serving " + sock), std::string::npos) << log;
}

TEST_F(LauncherProcessTest, SameGroupReusesTheDaemonOtherGroupGetsItsOwn) {
  const std::string sandbox = MakeBundle("pod1", "pod1");
  const std::string c2 = MakeBundle("c2", "pod1");
  const std::string other = MakeBundle("pod2", "pod2");
  RunResult r1 = Start("pod1", sandbox);
  RunResult r2 = Start("c2", c2);
  RunResult r3 = Start("pod2", other);
  ASSERT_EQ(r1.exit_code, 0) << r1.out;
  ASSERT_EQ(r2.exit_code, 0) << r2.out;
  ASSERT_EQ(r3.exit_code, 0) << r3.out;
  EXPECT_EQ(r1.out, r2.out);
  EXPECT_NE(r1.out, r3.out);
  EXPECT_EQ(*ReadFile(c2 + "/address"), r1.out);
  EXPECT_EQ(Info(r1.out)["pid"], Info(r2.out)["pid"]);
  EXPECT_NE(Info(r1.out)["pid"], Info(r3.out)["pid"]);
  EXPECT_EQ(daemons_.size(), 2u);
  EXPECT_EQ(Info(r2.out)["id"], "pod1") << "the group's daemon is the first task's";
}

TEST_F(LauncherProcessTest, WithoutSandboxAnnotationGroupIsTheContainerId) {
  const std::string bundle = MakeBundle("solo", "");
  RunResult r = Start("solo", bundle);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, SocketAddress(kContainerdAddress, "k8s.io", "solo", socket_dir_));
}

TEST_F(LauncherProcessTest, RuntimeOptionsFromStdinReachTheDaemon) {
  const std::string b1 = MakeBundle("c1", "");
  const std::string b2 = MakeBundle("c2", "");
  RunResult r1 = Start("c1", b1, SerializeRuntimeOptions({"/etc/capsule/a.yaml"}, "runtimeoptions.v1.Options"));
  RunResult r2 = Start("c2", b2, SerializeRuntimeOptions(
      {"/etc/capsule/b.yaml"}, "type.googleapis.com/runtimeoptions.v1.Options"));
  ASSERT_EQ(r1.exit_code, 0) << r1.out;
  ASSERT_EQ(r2.exit_code, 0) << r2.out;
  EXPECT_EQ(Info(r1.out)["config"], "/etc/capsule/a.yaml");
  EXPECT_EQ(Info(r2.out)["config"], "/etc/capsule/b.yaml");
}

TEST_F(LauncherProcessTest, BadStartLeavesNothingBehind) {
  const std::string bundle = MakeBundle("c1", "");
  RunResult r = Run(StartArgs("c1"), bundle, "not a protobuf Any \xff\xff");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("runtime options"), std::string::npos) << r.out;
  r = Run(StartArgs("c1"), bundle, SerializeRuntimeOptions({"/x"}, "containerd.runc.v1.Options"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("containerd.runc.v1.Options"), std::string::npos) << r.out;
  ASSERT_EQ(::unlink((bundle + "/config.json").c_str()), 0);
  r = Run(StartArgs("c1"), bundle);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(bundle + "/config.json"), std::string::npos) << r.out;
  EXPECT_TRUE(SocketDirEmpty());
  EXPECT_FALSE(PathExists(bundle + "/address"));
}

TEST_F(LauncherProcessTest, StaleSocketIsReplaced) {
  const std::string bundle = MakeBundle("c1", "");
  const std::string address = SocketAddress(kContainerdAddress, "k8s.io", "c1", socket_dir_);
  const std::string path = *SocketPathFromAddress(address);
  { auto fd = ListenUnix(path); ASSERT_OK(fd); }  // closed: file stays, nobody listens
  ASSERT_TRUE(PathExists(path));
  RunResult r = Start("c1", bundle);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, address);
  EXPECT_FALSE(Info(address).empty()) << "a new daemon serves the path";
}

TEST_F(LauncherProcessTest, DaemonRemovesItsSocketOnShutdownAndOnSigterm) {
  const std::string b1 = MakeBundle("c1", "");
  const std::string b2 = MakeBundle("c2", "");
  RunResult r1 = Start("c1", b1);
  RunResult r2 = Start("c2", b2);
  ASSERT_EQ(r1.exit_code, 0);
  ASSERT_EQ(r2.exit_code, 0);
  const pid_t p1 = std::stoi(Info(r1.out)["pid"]);
  const pid_t p2 = std::stoi(Info(r2.out)["pid"]);
  ASSERT_OK(Ask(*SocketPathFromAddress(r1.out), "exit"));  // the service's Shutdown
  int st1 = WaitDaemon(p1);
  ASSERT_EQ(::kill(p2, SIGTERM), 0);
  int st2 = WaitDaemon(p2);
  EXPECT_TRUE(WIFEXITED(st1) && WEXITSTATUS(st1) == 0) << st1;
  EXPECT_TRUE(WIFEXITED(st2) && WEXITSTATUS(st2) == 0) << st2;
  EXPECT_TRUE(SocketDirEmpty());
  EXPECT_NE(DrainLog(b2).find("got signal 15"), std::string::npos);
}

TEST_F(LauncherProcessTest, DeleteAfterDaemonDiedCleansUpAndReports137) {
  const std::string bundle = MakeBundle("c1", "");
  RunResult r = Start("c1", bundle);
  ASSERT_EQ(r.exit_code, 0);
  const pid_t pid = std::stoi(Info(r.out)["pid"]);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  WaitDaemon(pid);
  ASSERT_FALSE(SocketDirEmpty()) << "a killed daemon leaves its socket";
  ASSERT_OK(WriteFile(bundle + "/test-vmm-pid", "4242"));

  timespec before{};
  ::clock_gettime(CLOCK_REALTIME, &before);
  RunResult d = Run({"-namespace", "k8s.io", "-address", kContainerdAddress, "-publish-binary",
                     "/usr/bin/containerd", "-id", "c1", "-bundle", bundle, "delete"},
                    "/", "", /*separate_stderr=*/true);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  containerd::task::v2::DeleteResponse resp;
  ASSERT_TRUE(resp.ParseFromString(d.out));
  EXPECT_EQ(resp.exit_status(), 137u);
  EXPECT_EQ(resp.pid(), 4242u) << "pid from the clean-up hook";
  EXPECT_TRUE(resp.has_exited_at());
  EXPECT_GE(resp.exited_at().seconds(), before.tv_sec);
  EXPECT_LE(resp.exited_at().seconds(), before.tv_sec + 60);
  EXPECT_TRUE(SocketDirEmpty());
  EXPECT_FALSE(PathExists(bundle + "/address"));
}

TEST_F(LauncherProcessTest, DeleteKeepsTheSocketOfALiveGroupDaemon) {
  const std::string sandbox = MakeBundle("pod1", "pod1");
  const std::string c2 = MakeBundle("c2", "pod1");
  ASSERT_EQ(Start("pod1", sandbox).exit_code, 0);
  RunResult r = Start("c2", c2);
  ASSERT_EQ(r.exit_code, 0);
  // The daemon's clean-up would report this pid: the launcher answered alone.
  ASSERT_OK(WriteFile(c2 + "/test-vmm-pid", "4242"));
  RunResult d = Run({"-namespace", "k8s.io", "-address", kContainerdAddress, "-id", "c2",
                     "-bundle", c2, "delete"}, "/", "", true);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  containerd::task::v2::DeleteResponse resp;
  ASSERT_TRUE(resp.ParseFromString(d.out));
  EXPECT_EQ(resp.pid(), 0u) << "a live group's delete ran the daemon binary's clean-up";
  EXPECT_FALSE(Info(r.out).empty()) << "the pod's daemon still serves";
}

TEST_F(LauncherProcessTest, VersionHelpAndBadFlags) {
  RunResult v = Run({"--version"}, "/");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("Version:"), std::string::npos);
  RunResult h = Run({"-h"}, "/");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("start"), std::string::npos);
  RunResult bad = Run({"-namespace", "k8s.io", "-bogus", "start"}, "/");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("flag provided but not defined: -bogus"), std::string::npos);
  RunResult missing = Run({"-namespace", "k8s.io", "-id", "c1", "start"}, "/");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("-address"), std::string::npos);
}

}  // namespace
}  // namespace capsule::shim::launcher
