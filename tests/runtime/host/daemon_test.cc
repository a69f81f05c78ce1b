#include "runtime/host/daemon.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <thread>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/host/process_uids.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

// Runs `script` under /bin/sh as a daemon with stdout to dir/out.
Result<Daemon> ShDaemon(const TempDir& dir, const std::string& script, std::vector<int> keep = {}) {
  UniqueFd out(::open(dir.Join("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return ErrnoStatus("open out");
  DaemonOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.stdout_fd = out.get();
  o.keep_fds = std::move(keep);
  return SpawnDaemon(o);
}

// Spawns `o` with its stdout on a pipe and returns the daemon and its first
// write (read once the daemon and what it started hold the only write end).
struct ReadDaemon {
  Daemon daemon;
  std::string first_output;
};
Result<ReadDaemon> SpawnAndReadFirstOutput(DaemonOptions o) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  UniqueFd out_read(p[0]), out_write(p[1]);
  o.stdout_fd = out_write.get();
  auto d = SpawnDaemon(o);
  if (!d.ok()) return d.status();
  out_write.reset();
  char buf[64] = {};
  const ssize_t n = ::read(out_read.get(), buf, sizeof buf - 1);
  if (n < 0) return ErrnoStatus("read daemon output");
  return ReadDaemon{std::move(*d), std::string(buf, static_cast<size_t>(n))};
}

TEST(DaemonTest, DaemonIsNotOurChildAndRunsInItsOwnSession) {
  DaemonOptions o;
  o.argv = {"/bin/sh", "-c", "echo started; exec sleep 60"};
  ASSERT_OK_AND_ASSIGN(auto r, SpawnAndReadFirstOutput(o));
  const Daemon& d = r.daemon;
  EXPECT_EQ(r.first_output, "started\n");
  EXPECT_EQ(::waitpid(d.pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  EXPECT_NE(::getsid(d.pid), ::getsid(0));
  EXPECT_FALSE(PidfdExited(d.pidfd.get()));
  ASSERT_OK(PidfdSignal(d.pidfd.get(), SIGKILL));
  EXPECT_TRUE(PidfdWait(d.pidfd.get(), 10000));
}

// The flag survives exec: the program itself runs without huge pages (a
// daemon started without it has them as we do: 0 on a kernel without them).
TEST(DaemonTest, ADaemonWithoutHugePagesKeepsThemOffThroughExec) {
  auto ours = ReadFile("/proc/self/status");
  ASSERT_OK(ours);
  const std::string inherited = "THP_enabled:\t" + StatusField(*ours, "THP_enabled") + "\n";
  for (const bool off : {false, true}) {
    DaemonOptions o;
    o.argv = {"/bin/grep", "THP_enabled", "/proc/self/status"};
    o.no_huge_pages = off;
    ASSERT_OK_AND_ASSIGN(auto r, SpawnAndReadFirstOutput(o));
    EXPECT_EQ(r.first_output, off ? "THP_enabled:\t0\n" : inherited);
    EXPECT_TRUE(PidfdWait(r.daemon.pidfd.get(), 10000));
  }
}

TEST(DaemonTest, MissingProgramNamesIt) {
  DaemonOptions o;
  o.argv = {"/nonexistent/qemu"};
  auto d = SpawnDaemon(o);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("/nonexistent/qemu"), std::string::npos);
}

TEST(DaemonTest, BadCwdReportsTheStep) {
  DaemonOptions o;
  o.argv = {"/bin/true"};
  o.cwd = "/nonexistent-dir";
  auto d = SpawnDaemon(o);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("chdir"), std::string::npos) << d.status().ToString();
}

TEST(DaemonTest, OnlyKeptFdsAreInherited) {
  auto dir = TempDir::Create("daemon");
  ASSERT_OK(dir);
  // Both descriptors are inheritable (no CLOEXEC); only one is kept.
  UniqueFd kept(::open("/dev/null", O_RDONLY));
  UniqueFd leaked(::open("/dev/null", O_RDONLY));
  ASSERT_TRUE(kept && leaked);
  std::string script = "for f in " + std::to_string(kept.get()) + " " + std::to_string(leaked.get()) +
                       "; do if [ -e /proc/self/fd/$f ]; then echo open $f; else echo closed $f; fi; done";
  auto d = ShDaemon(*dir, script, {kept.get()});
  ASSERT_OK(d);
  ASSERT_TRUE(PidfdWait(d->pidfd.get(), 10000));
  EXPECT_EQ(*ReadFile(dir->Join("out")), "open " + std::to_string(kept.get()) + "\nclosed " +
                                             std::to_string(leaked.get()) + "\n");
}

// The pool daemon boots VMs from several threads. Each spawn's intermediate
// process inherits the other spawns' pipe ends (they are CLOEXEC, and it
// does not exec): spawns at once must still all finish. Waiting for end of
// file there once hung two restores of a burst for ever. A hang ends the
// binary at once, so the stuck spawns cannot keep it from exiting.
TEST(DaemonTest, SpawnsFromManyThreadsAtOnceAllFinish) {
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::future<int>> spawners;
  for (int t = 0; t < kThreads; ++t) {
    spawners.push_back(std::async(std::launch::async, [] {
      int ok = 0;
      for (int i = 0; i < kEach; ++i) {
        DaemonOptions o;
        o.argv = {"/bin/true"};
        auto d = SpawnDaemon(o);
        if (d.ok() && PidfdWait(d->pidfd.get(), 10000)) ++ok;
      }
      return ok;
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int ok = 0;
  for (auto& s : spawners) {
    if (s.wait_until(deadline) != std::future_status::ready) {
      std::cerr << "spawns from " << kThreads << " threads at once did not finish within 60 s\n";
      // The stuck intermediates are our children, in sessions of their own,
      // holding our stdout: end them, or they would hold ctest up too.
      for (const std::string& e : ListDir("/proc")) {
        auto stat = ReadFile("/proc/" + e + "/stat");
        const size_t paren = stat.ok() ? stat->rfind(')') : std::string::npos;
        if (paren != std::string::npos && std::atoi(stat->c_str() + paren + 4) == ::getpid())
          ::kill(std::atoi(e.c_str()), SIGKILL);
      }
      std::_Exit(1);
    }
    ok += s.get();
  }
  EXPECT_EQ(ok, kThreads * kEach);
}

TEST(DaemonTest, IdentityFindsTheSameProcessOnly) {
  auto dir = TempDir::Create("daemon");
  ASSERT_OK(dir);
  auto d = ShDaemon(*dir, "exec sleep 60");
  ASSERT_OK(d);
  // SpawnDaemon returns before the daemon execs: until then its command
  // line is this test's, and no argument of it ends with "60".
  const std::string sleep_cmdline("sleep\0" "60\0", 9);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ReadFile("/proc/" + std::to_string(d->pid) + "/cmdline").value_or("") != sleep_cmdline) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the daemon never became sleep 60";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto id = IdentifyProcess(d->pid);
  ASSERT_OK(id);
  EXPECT_FALSE(id->boot_id.empty());
  auto fd = OpenProcess(*id);
  ASSERT_OK(fd);

  ProcessIdentity reused = *id;
  reused.start_time += 1;
  EXPECT_EQ(OpenProcess(reused).status().code(), Code::kNotFound);
  ProcessIdentity other_boot = *id;
  other_boot.boot_id = "00000000-0000-0000-0000-000000000000";
  EXPECT_EQ(OpenProcess(other_boot).status().code(), Code::kNotFound);

  // The same process known by an argument it was given instead.
  auto by_arg = OpenProcessWithArgument(d->pid, "60");  // sh -c "exec sleep 60", then sleep 60
  ASSERT_OK(by_arg);
  auto other = OpenProcessWithArgument(d->pid, "--socket-path=/elsewhere");
  EXPECT_EQ(other.status().code(), Code::kNotFound);
  EXPECT_NE(other.status().message().find("now names another process"), std::string::npos) << other.status().ToString();

  ASSERT_OK(PidfdSignal(d->pidfd.get(), SIGKILL));
  ASSERT_TRUE(PidfdWait(fd->get(), 10000));
  EXPECT_EQ(OpenProcess(*id).status().code(), Code::kNotFound);
  EXPECT_EQ(OpenProcessWithArgument(d->pid, "60").status().code(), Code::kNotFound) << "it exited";
}

TEST(DaemonTest, LogTailStartsAtALineBoundary) {
  auto dir = TempDir::Create("daemon");
  ASSERT_OK(dir);
  std::string text;
  for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + "\n";
  ASSERT_OK(WriteFile(dir->Join("log"), text));
  std::string tail = ReadLogTail(dir->Join("log"), 30);
  EXPECT_EQ(tail, "line 97\nline 98\nline 99\n");
  EXPECT_EQ(ReadLogTail(dir->Join("log"), 1 << 20), text);
  EXPECT_EQ(ReadLogTail(dir->Join("missing")), "");
}

}  // namespace
}  // namespace capsule
