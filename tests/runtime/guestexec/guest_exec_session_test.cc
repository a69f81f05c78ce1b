// The process JSON `capsule-runtime exec` sends is what the agent's own OCI
// parser accepts, with the defaults and the caller's overrides; the session
// against an agent that lies ends cleanly and always removes the process.
#include "runtime/guestexec/guest_exec_session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "runtime/oci/spec_parser.h"
#include "tests/runtime/guestexec/lying_agent.h"
#include "tests/support/status_matchers.h"

namespace capsule::guestexec {
namespace {

bool Has(const std::vector<std::string>& env, const std::string& kv) {
  return std::find(env.begin(), env.end(), kv) != env.end();
}

TEST(GuestProcessJsonTest, PipesModeHasDefaultsAndParsesAsTheAgentDoes) {
  ExecOptions o;
  o.args = {"ps", "-ef"};
  auto p = oci::ParseProcess(GuestProcessJson(o));
  ASSERT_OK(p);
  EXPECT_EQ(p->args, (std::vector<std::string>{"ps", "-ef"}));
  EXPECT_EQ(p->cwd, "/");
  EXPECT_FALSE(p->terminal);
  EXPECT_FALSE(p->console_size.has_value());
  EXPECT_EQ(p->user.uid, 0u);
  EXPECT_TRUE(Has(p->env, "HOME=/root"));
  EXPECT_TRUE(std::any_of(p->env.begin(), p->env.end(), [](const std::string& e) { return e.rfind("PATH=", 0) == 0; }));
  EXPECT_FALSE(std::any_of(p->env.begin(), p->env.end(), [](const std::string& e) { return e.rfind("TERM=", 0) == 0; }));
}

TEST(GuestProcessJsonTest, TtyCarriesTermAndSizeAndTheCallersEnvOverridesDefaults) {
  ExecOptions o;
  o.args = {"sh"};
  o.tty = true;
  o.term = "screen-256color";
  o.size = WindowSize{45, 123};
  o.cwd = "/proc";
  o.env = {"PATH=/opt/bin", "EXTRA=a=b"};
  auto p = oci::ParseProcess(GuestProcessJson(o));
  ASSERT_OK(p);
  EXPECT_TRUE(p->terminal);
  ASSERT_TRUE(p->console_size.has_value());
  EXPECT_EQ(p->console_size->height, 45u);
  EXPECT_EQ(p->console_size->width, 123u);
  EXPECT_EQ(p->cwd, "/proc");
  EXPECT_TRUE(Has(p->env, "TERM=screen-256color"));
  EXPECT_TRUE(Has(p->env, "PATH=/opt/bin"));
  EXPECT_EQ(std::count_if(p->env.begin(), p->env.end(), [](const std::string& e) { return e.rfind("PATH=", 0) == 0; }),
            1);
  EXPECT_TRUE(Has(p->env, "EXTRA=a=b"));
}

// A pipe the session writes the command's output to, read back after.
struct OutputPipe {
  UniqueFd read, write;
  static OutputPipe Make() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    return {UniqueFd(fds[0]), UniqueFd(fds[1])};
  }
  std::string Drain() {
    write.reset();
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(read.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }
};

ExecOptions Options() {
  ExecOptions o;
  o.args = {"cat"};
  return o;
}

TEST(GuestExecSessionTest, OutputAndExitStatusPassThroughAndTheProcessIsRemoved) {
  LyingAgent agent;
  agent.stdout_chunks = {"hello ", "guest\n"};
  agent.exit_status = 7;
  OutputPipe out = OutputPipe::Make();
  SessionFds fds;
  fds.out = out.write.get();
  SessionResult r = RunGuestExec(agent, Options(), fds);
  ASSERT_TRUE(r.started);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.exit_status, 7);
  EXPECT_EQ(out.Drain(), "hello guest\n");
  EXPECT_EQ(agent.removed.size(), 1u);
  EXPECT_TRUE(agent.stdin_closed) << "without -i the command must read end of file";
}

TEST(GuestExecSessionTest, MoreOutputThanAskedEndsTheStreamUnwritten) {
  LyingAgent agent;
  agent.stdout_chunks = {std::string(64 * 1024 + 1, 'x'), "never read"};
  OutputPipe out = OutputPipe::Make();
  SessionFds fds;
  fds.out = out.write.get();
  SessionResult r = RunGuestExec(agent, Options(), fds);
  EXPECT_OK(r.status);
  EXPECT_EQ(out.Drain(), "");
  EXPECT_EQ(agent.stdout_reads, 1);
  EXPECT_EQ(agent.removed.size(), 1u);
}

TEST(GuestExecSessionTest, AnImpossibleExitStatusIsAnErrorNotAnExitCode) {
  for (int32_t lie : {300, -1, 125 + 256}) {
    LyingAgent agent;
    agent.exit_status = lie;
    SessionFds fds;
    OutputPipe out = OutputPipe::Make();
    fds.out = out.write.get();
    SessionResult r = RunGuestExec(agent, Options(), fds);
    EXPECT_TRUE(r.started);
    EXPECT_EQ(r.status.code(), Code::kInvalidArgument) << lie;
    EXPECT_NE(r.status.message().find(std::to_string(lie)), std::string::npos) << r.status.message();
    EXPECT_EQ(agent.removed.size(), 1u);
  }
}

TEST(GuestExecSessionTest, AFailedStartIsReportedAsNotStarted) {
  LyingAgent agent;
  agent.exec_error = NotFound("exec \"sh\": executable file not found in $PATH");
  SessionResult r = RunGuestExec(agent, Options(), SessionFds{});
  EXPECT_FALSE(r.started);
  EXPECT_EQ(r.status.code(), Code::kNotFound);
  EXPECT_TRUE(agent.removed.empty());
}

TEST(GuestExecSessionTest, StdinGoesToTheProcessThenEndOfFile) {
  LyingAgent agent;
  int in[2];
  ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
  UniqueFd in_read(in[0]);
  ASSERT_OK(WriteAll(in[1], "typed\n", "stdin"));
  ::close(in[1]);
  ExecOptions o = Options();
  o.pass_stdin = true;
  OutputPipe out = OutputPipe::Make();
  SessionFds fds;
  fds.in = in_read.get();
  fds.out = out.write.get();
  agent.exit_on_stdin_eof = true;
  SessionResult r = RunGuestExec(agent, o, fds);
  ASSERT_OK(r.status);
  std::lock_guard lock(agent.mu);
  EXPECT_EQ(agent.stdin_data, "typed\n");
  EXPECT_TRUE(agent.stdin_closed);
}

// A pipe stands in for the signalfd: the session reads signalfd_siginfo
// records from it.
struct FakeSignals {
  UniqueFd read, write;
  static FakeSignals Make() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    return {UniqueFd(fds[0]), UniqueFd(fds[1])};
  }
  void Raise(int sig) {
    signalfd_siginfo info{};
    info.ssi_signo = static_cast<uint32_t>(sig);
    EXPECT_EQ(::write(write.get(), &info, sizeof info), static_cast<ssize_t>(sizeof info));
  }
};

TEST(GuestExecSessionTest, ASignalGoesToEverythingTheCommandStartedAndASecondOneKills) {
  LyingAgent agent;
  agent.exit_on_kill = true;  // a command that ignores SIGTERM
  FakeSignals sig = FakeSignals::Make();
  sig.Raise(SIGTERM);
  sig.Raise(SIGTERM);
  OutputPipe out = OutputPipe::Make();
  SessionFds fds;
  fds.out = out.write.get();
  fds.signals = sig.read.get();
  SessionResult r = RunGuestExec(agent, Options(), fds);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.exit_status, 128 + SIGKILL);
  std::lock_guard lock(agent.mu);
  ASSERT_GE(agent.signals.size(), 2u);
  EXPECT_EQ(agent.signals[0].signal(), static_cast<uint32_t>(SIGTERM));
  EXPECT_TRUE(agent.signals[0].all());
  EXPECT_TRUE(agent.signals[0].container_id().empty());
  EXPECT_EQ(agent.signals[1].signal(), static_cast<uint32_t>(SIGKILL));
  EXPECT_EQ(agent.removed.size(), 1u);
}

// --timeout: a command that runs longer is killed with all it started, the
// session says so, and the process is still removed.
TEST(GuestExecSessionTest, ACommandPastItsTimeoutIsKilledAndTheSessionSaysSo) {
  LyingAgent agent;
  agent.exit_on_kill = true;  // runs until killed
  ExecOptions o = Options();
  o.timeout = std::chrono::milliseconds(200);
  OutputPipe out = OutputPipe::Make();
  SessionFds fds;
  fds.out = out.write.get();
  SessionResult r = RunGuestExec(agent, o, fds);
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.status.code(), Code::kDeadlineExceeded) << r.status.ToString();
  EXPECT_NE(r.status.message().find("killed"), std::string::npos) << r.status.message();
  std::lock_guard lock(agent.mu);
  ASSERT_FALSE(agent.signals.empty());
  EXPECT_EQ(agent.signals.front().signal(), static_cast<uint32_t>(SIGKILL));
  EXPECT_TRUE(agent.signals.front().all());
  EXPECT_EQ(agent.removed.size(), 1u);
}

// An agent whose reads bring neither data nor the end of the stream does
// not make the session spin: the reads back off.
TEST(GuestExecSessionTest, EmptyReadsBackOffInsteadOfSpinning) {
  LyingAgent agent;
  agent.empty_reads = true;
  agent.exit_after = std::chrono::milliseconds(500);
  OutputPipe out = OutputPipe::Make();
  SessionFds fds;
  fds.out = out.write.get();
  SessionResult r = RunGuestExec(agent, Options(), fds);
  EXPECT_TRUE(r.started);
  std::lock_guard lock(agent.mu);
  // 500 ms of backing off from 1 ms up to 128 ms, plus the drain grace at
  // 128 ms a read: a few dozen reads, where a spinning loop makes millions.
  EXPECT_LT(agent.stdout_reads, 100) << "the session spun on empty reads";
  EXPECT_GT(agent.stdout_reads, 3);
}

TEST(GuestExecSessionTest, AStalledAgentDoesNotHangTheSession) {
  LyingAgent agent;
  agent.stalled = true;
  FakeSignals sig = FakeSignals::Make();
  sig.Raise(SIGINT);  // its SignalProcess times out: the session gives up
  ExecOptions o = Options();
  o.give_up_wait = std::chrono::milliseconds(200);
  OutputPipe out = OutputPipe::Make();
  SessionFds fds;
  fds.out = out.write.get();
  fds.signals = sig.read.get();
  SessionResult r = RunGuestExec(agent, o, fds);
  EXPECT_TRUE(r.started);
  EXPECT_FALSE(r.status.ok());
  std::lock_guard lock(agent.mu);
  EXPECT_TRUE(agent.closed);
}

TEST(GuestExecSessionTest, AClosedStdoutGivesTheCommandSigpipe) {
  ::signal(SIGPIPE, SIG_IGN);  // as capsule-runtime exec runs
  LyingAgent agent;
  agent.stdout_chunks = {"first line\n", "second line\n"};
  agent.wait_for_signal = true;
  OutputPipe out = OutputPipe::Make();
  out.read.reset();  // `exec ... | head` after head exited
  SessionFds fds;
  fds.out = out.write.get();
  SessionResult r = RunGuestExec(agent, Options(), fds);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.exit_status, 128 + SIGPIPE);
  std::lock_guard lock(agent.mu);
  ASSERT_FALSE(agent.signals.empty());
  EXPECT_EQ(agent.signals[0].signal(), static_cast<uint32_t>(SIGPIPE));
  EXPECT_EQ(agent.removed.size(), 1u);
}

TEST(GuestExecSessionTest, AStartThatTimedOutIsKilledAndRemovedAnyway) {
  LyingAgent agent;
  agent.exec_error = DeadlineExceeded("agent ExecGuestProcess: deadline exceeded after 75000 ms");
  SessionResult r = RunGuestExec(agent, Options(), SessionFds{});
  EXPECT_FALSE(r.started);
  EXPECT_EQ(r.status.code(), Code::kDeadlineExceeded);
  std::lock_guard lock(agent.mu);
  ASSERT_FALSE(agent.signals.empty());
  EXPECT_EQ(agent.signals[0].signal(), static_cast<uint32_t>(SIGKILL));
  EXPECT_EQ(agent.removed.size(), 1u);
}

TEST(GuestExecSessionTest, AProcessTheAgentStillCallsRunningIsKilledThenRemoved) {
  LyingAgent agent;
  agent.remove_first_fails = true;
  OutputPipe out = OutputPipe::Make();
  SessionFds fds;
  fds.out = out.write.get();
  SessionResult r = RunGuestExec(agent, Options(), fds);
  EXPECT_OK(r.status);
  std::lock_guard lock(agent.mu);
  ASSERT_FALSE(agent.signals.empty());
  EXPECT_EQ(agent.signals.back().signal(), static_cast<uint32_t>(SIGKILL));
  EXPECT_EQ(agent.removed.size(), 1u);
}

}  // namespace
}  // namespace capsule::guestexec
