// The shim's remaining task features end to end through a real containerd
// 1.6 and `ctr`, each task in a real QEMU microVM (four boots): stdin piped
// into `ctr run`, `ctr run -t` on a terminal the test owns (tty, window
// size and resize, exit code), pause/resume, resource updates, execs with
// stdin and with a terminal on one long-running task, and an OOM kill
// (exit 137, /tasks/oom).
// After each test nothing of ours is left (the fixture's leak check).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/file_util.h"
#include "tests/e2e/containerd_tasks.h"
#include "tests/e2e/ctr_e2e_fixture.h"
#include "tests/e2e/pty_command.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A single-quoted word for sh -c.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `ctr <args> < input_file`, to completion.
Result<CommandResult> CtrWithStdin(const ContainerdHarness& ctrd, const std::vector<std::string>& args,
                                   const std::string& input_file, seconds timeout) {
  std::string cmd = "exec";
  for (const auto& a : ctrd.CtrArgv(args)) cmd += " " + ShellQuote(a);
  cmd += " < " + ShellQuote(input_file);
  return RunCommand({"/bin/sh", "-c", cmd}, timeout);
}

// Numbered lines, enough for several of the shim's 32 KiB stdin chunks.
std::string NumberedLines(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += "line " + std::to_string(i) + " of the piped input\n";
  return out;
}

// The last complete number a counter loop wrote to `log`, -1 before any.
long LastCount(const std::string& log) {
  auto content = ReadFile(log);
  if (!content.ok() || content->empty()) return -1;
  std::string s = *content;
  if (s.back() != '\n') s.erase(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
  if (s.empty()) return -1;
  s.pop_back();
  return std::stol(s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1));
}

// Polls the counter until it passes `above`; its last value.
long WaitForCountAbove(const std::string& log, long above, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  long c = LastCount(log);
  while (c <= above && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
    c = LastCount(log);
  }
  return c;
}

class CtrE2eFeaturesTest : public CtrE2eTest {
 protected:
  // The STATUS column of `ctr task ls` for `id` ("" when not listed).
  std::string TaskStatus(const std::string& id) {
    auto ls = Ctr({"task", "ls"});
    if (!ls.ok() || !ls->ok()) return "";
    size_t pos = 0;
    while (pos < ls->out.size()) {
      size_t end = ls->out.find('\n', pos);
      if (end == std::string::npos) end = ls->out.size();
      const std::string line = ls->out.substr(pos, end - pos);
      pos = end + 1;
      if (line.rfind(id + " ", 0) != 0) continue;
      return line.substr(line.find_last_of(' ') + 1);
    }
    return "";
  }

  // `ctr task exec` of `sh -c script` in `id`; its stdout.
  std::string ExecSh(const std::string& id, const std::string& exec_id, const std::string& script) {
    auto r = Ctr({"task", "exec", "--exec-id", exec_id, id, "sh", "-c", script});
    EXPECT_OK(r);
    if (!r.ok()) return "";
    EXPECT_EQ(r->exit_code, 0) << exec_id << ": " << r->err;
    return r->out;
  }
};

// Stdin end to end: ctr copies its stdin into the task's stdin FIFO, the
// shim forwards it to the guest, and EOF on ctr's stdin (FIFO closed, then
// CloseIO) reaches `cat` as EOF, so it exits 0 having echoed every byte.
TEST_F(CtrE2eFeaturesTest, RunWithStdinEchoesEveryByteAndEndsOnEof) {
  auto tmp = TempDir::Create("ctr-e2e-stdin", env_->dir());
  ASSERT_OK(tmp);
  const std::string input = NumberedLines(6000);  // ~190 KiB
  const std::string in_file = tmp->Join("input");
  ASSERT_OK(WriteFile(in_file, input));
  ids_.push_back("stdin");
  auto r = CtrWithStdin(*ctrd_,
                        {"-n", kNs, "run", "--runtime", kCapsuleRuntimeType, "--runtime-config-path",
                         env_->config_path(), "--rm", kBusyboxImage, "stdin", "cat"},
                        in_file, kRunTimeout);
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 0) << "stderr: " << r->err;
  EXPECT_EQ(r->out.size(), input.size()) << "stderr: " << r->err;
  EXPECT_TRUE(r->out == input) << "the output differs from the input; first 200 bytes: " << r->out.substr(0, 200);
}

// `ctr run -t`: the guest process gets a terminal (tty names a /dev/pts
// device), ctr's window size arrives through ResizePty, a resize of the
// user's terminal (SIGWINCH to ctr) arrives too, typed commands run
// interactively, and the shell's exit code is ctr's.
TEST_F(CtrE2eFeaturesTest, RunWithTtyIsInteractiveAndFollowsTheWindowSize) {
  ids_.push_back("tty");
  auto pty = PtyCommand::Start(ctrd_->CtrArgv({"-n", kNs, "run", "--runtime", kCapsuleRuntimeType,
                                               "--runtime-config-path", env_->config_path(), "-t", "--rm",
                                               kBusyboxImage, "tty", "sh"}),
                               30, 100);
  ASSERT_OK(pty);
  Status prompt = pty->WaitForOutput("# ", kRunTimeout);
  ASSERT_OK(prompt);

  pty->Consume();
  ASSERT_OK(pty->Write("tty\n"));
  Status tty = pty->WaitForOutput("/dev/pts/", seconds(60));
  EXPECT_OK(tty);

  // The typed line echoes as "R$(stty ...)"; only the shell's output reads
  // "R<rows>x<cols>". ctr sends its size right after Start, so the first
  // answers may still be the pty's initial 0x0: ask until it shows.
  auto await_size = [&](const std::string& want) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    Status st;
    while (std::chrono::steady_clock::now() < deadline) {
      pty->Consume();
      if (st = pty->Write("echo R$(stty size | tr ' ' x)\n"); !st.ok()) return st;
      st = pty->WaitForOutput(want, seconds(3));
      if (st.code() != Code::kDeadlineExceeded) return st;
    }
    return st;
  };
  Status initial = await_size("R30x100");
  EXPECT_OK(initial) << "ctr's window size reached the guest: " << initial.ToString();
  ASSERT_OK(pty->Resize(40, 120));
  Status resized = await_size("R40x120");
  EXPECT_OK(resized) << "a resize of ctr's terminal reached the guest: " << resized.ToString();

  ASSERT_OK(pty->Write("exit 7\n"));
  auto code = pty->Wait(seconds(60));
  ASSERT_OK(code) << "; output: " << pty->output();
  EXPECT_EQ(*code, 7) << "output: " << pty->output();
}

// One long-running task (one boot) for pause/resume, Update, exec with
// stdin and exec with a terminal. Its counter goes to a file:// log, so the host watches it even
// while the VM is stopped. "No progress while paused" allows one step: a
// line the shim had read just before the pause may land after it.
TEST_F(CtrE2eFeaturesTest, PauseResumeUpdateAndExecsOnOneTask) {
  auto tmp = TempDir::Create("ctr-e2e-long", env_->dir());
  ASSERT_OK(tmp);
  const std::string log = tmp->Join("counter.log");
  auto r = Run("longrun", {"sh", "-c", "i=0; while true; do i=$((i+1)); echo $i; sleep 0.2; done"},
               /*detach=*/true,
               // ctr's default spec, unlike CRI's, mounts no cgroup fs: add one to look at.
               {"--log-uri", "file://" + log, "--mount", "type=cgroup,src=cgroup,dst=/sys/fs/cgroup,options=ro"});
  ASSERT_OK(r);
  ASSERT_EQ(r->exit_code, 0) << r->err;
  ASSERT_GE(WaitForCountAbove(log, 2, milliseconds(60000)), 3) << "the counter runs";
  EXPECT_EQ(TaskStatus("longrun"), "RUNNING");

  auto pause = Ctr({"task", "pause", "longrun"});
  ASSERT_OK(pause);
  ASSERT_EQ(pause->exit_code, 0) << pause->err;
  EXPECT_EQ(TaskStatus("longrun"), "PAUSED");
  const long at_pause = LastCount(log);
  std::this_thread::sleep_for(seconds(2));  // what is observed is the absence of progress
  const long after_wait = LastCount(log);
  EXPECT_LE(after_wait, at_pause + 1) << "the counter ran on while paused";

  auto resume = Ctr({"task", "resume", "longrun"});
  ASSERT_OK(resume);
  ASSERT_EQ(resume->exit_code, 0) << resume->err;
  EXPECT_EQ(TaskStatus("longrun"), "RUNNING");
  EXPECT_GT(WaitForCountAbove(log, after_wait + 1, milliseconds(60000)), after_wait + 1)
      << "the counter runs again after resume";

  // The container's own cgroup (ctr gives it no cgroup namespace; the
  // expression also holds with one).
  const std::string cg = "/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)";
  EXPECT_EQ(ExecSh("longrun", "cg1", "cat " + cg + "/memory.max " + cg + "/pids.max"), "max\nmax\n")
      << "no limits before the update";
  Status up = UpdateTaskResources(ctrd_->grpc_address(), kNs, "longrun",
                                  R"({"memory":{"limit":100663296},"pids":{"limit":77}})");
  ASSERT_OK(up);
  EXPECT_EQ(ExecSh("longrun", "cg2", "cat " + cg + "/memory.max " + cg + "/pids.max"), "100663296\n77\n")
      << "the update reached the guest's cgroup";

  const std::string input = NumberedLines(3000);
  const std::string in_file = tmp->Join("exec-input");
  ASSERT_OK(WriteFile(in_file, input));
  auto exec = CtrWithStdin(*ctrd_, {"-n", kNs, "task", "exec", "--exec-id", "in1", "longrun", "md5sum"}, in_file,
                           seconds(60));
  ASSERT_OK(exec);
  EXPECT_EQ(exec->exit_code, 0) << exec->err;
  auto want = RunCommand({"/bin/sh", "-c", "md5sum < " + ShellQuote(in_file)}, seconds(10));
  ASSERT_TRUE(want.ok() && want->ok());
  EXPECT_EQ(exec->out, want->out) << "the exec read all of its stdin, then EOF";

  // An exec with a terminal: its own pty, ctr's size via ResizePty with
  // the exec id (it arrives after Start, hence the wait in the script).
  auto tty = PtyCommand::Start(
      ctrd_->CtrArgv({"-n", kNs, "task", "exec", "-t", "--exec-id", "t1", "longrun", "sh", "-c",
                      "tty; while [ \"$(stty size)\" = '0 0' ]; do sleep 0.1; done; echo S$(stty size | tr ' ' x); "
                      "exit 3"}),
      25, 90);
  ASSERT_OK(tty);
  auto tty_code = tty->Wait(seconds(60));
  ASSERT_OK(tty_code) << "; output: " << tty->output();
  EXPECT_EQ(*tty_code, 3) << tty->output();
  EXPECT_NE(tty->output().find("/dev/pts/"), std::string::npos) << tty->output();
  EXPECT_NE(tty->output().find("S25x90"), std::string::npos) << tty->output();

  ASSERT_NO_FATAL_FAILURE(RemoveTaskAndContainer("longrun", {"-f"}, seconds(90)));
}

// A task over its memory limit is OOM-killed in the guest: `ctr run`
// returns 137 and containerd publishes /tasks/oom for it (CRI's OOMKilled),
// before its /tasks/exit.
TEST_F(CtrE2eFeaturesTest, RunOverItsMemoryLimitIsOomKilled) {
  auto events = SubscribeEvents("oom");
  ASSERT_OK(events);
  // The string doubles until one copy no longer fits in 32 MiB.
  auto r = Run("oom", {"sh", "-c", "x=0123456789abcdef; while true; do x=$x$x; done"}, false,
               {"--memory-limit", "33554432"});
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 137) << "stdout: " << r->out << " stderr: " << r->err;
  const std::string oom_topic = "/tasks/oom {\"container_id\":\"oom\"}";
  const std::string exit_topic = "/tasks/exit {\"container_id\":\"oom\"";
  auto oom = events->WaitForOutput(oom_topic, seconds(30));
  EXPECT_OK(oom);
  auto exit = events->WaitForOutput(exit_topic, seconds(30));
  ASSERT_OK(exit);
  // CRI records the reason from /tasks/oom; the shim sends it first.
  EXPECT_LT(exit->find(oom_topic), exit->find(exit_topic)) << *exit;
  events->Stop();
}

}  // namespace
}  // namespace capsule::testing
