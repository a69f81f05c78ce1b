// containerd-shim-capsule-v2 under a real containerd 1.6 driven by `ctr`,
// each task in a real QEMU microVM (TCG here: ~5-20 s per boot, so eight
// boots in all): `ctr run --rm` output and exit codes, file:// and binary://
// log URIs, a detached task with exec, ps, metrics and kill, a shim killed
// after its task started and one killed while its VM boots. After each
// test nothing of ours is left (shim, QEMU, virtiofsd, capsule-vsockd,
// mounts, VM dir, shim socket).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <utility>

#include "runtime/common/file_util.h"
#include "tests/e2e/ctr_e2e_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

TEST_F(CtrE2eTest, RunRmPrintsTheOutputAndExitsZero) {
  auto r = Run("id", {"echo", "hello"});
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 0) << "stderr: " << r->err;
  EXPECT_EQ(r->out, "hello\n") << "stderr: " << r->err;
  auto ls = Ctr({"containers", "ls", "-q"});
  ASSERT_OK(ls);
  EXPECT_EQ(ls->out.find("id\n"), std::string::npos) << "--rm removed the container";
}

TEST_F(CtrE2eTest, RunRmReturnsTheTasksExitCode) {
  auto r = Run("exit3", {"sh", "-c", "echo to-stderr >&2; exit 3"});
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 3) << "stdout: " << r->out << " stderr: " << r->err;
  EXPECT_NE(r->err.find("to-stderr"), std::string::npos) << "stderr is proxied too: " << r->err;
}

TEST_F(CtrE2eTest, DetachedTaskExecPsMetricsAndKill) {
  auto r = Run("sleeper", {"sleep", "600"}, /*detach=*/true);
  ASSERT_OK(r);
  ASSERT_EQ(r->exit_code, 0) << r->err;

  auto ls = Ctr({"task", "ls"});
  ASSERT_OK(ls);
  EXPECT_NE(ls->out.find("RUNNING"), std::string::npos) << ls->out;

  auto exec = Ctr({"task", "exec", "--exec-id", "e1", "sleeper", "echo", "hi"});
  ASSERT_OK(exec);
  EXPECT_EQ(exec->exit_code, 0) << exec->err;
  EXPECT_EQ(exec->out, "hi\n");
  auto failing = Ctr({"task", "exec", "--exec-id", "e2", "sleeper", "sh", "-c", "exit 5"});
  ASSERT_OK(failing);
  EXPECT_EQ(failing->exit_code, 5) << failing->err;
  auto dup = Ctr({"task", "exec", "-d", "--exec-id", "e3", "sleeper", "sleep", "600"});
  ASSERT_OK(dup);
  EXPECT_EQ(dup->exit_code, 0) << dup->err;
  auto again = Ctr({"task", "exec", "-d", "--exec-id", "e3", "sleeper", "true"});
  ASSERT_OK(again);
  EXPECT_NE(again->exit_code, 0) << "a duplicate exec id is refused";

  auto ps = Ctr({"task", "ps", "sleeper"});
  ASSERT_OK(ps);
  EXPECT_EQ(ps->exit_code, 0) << ps->err;
  EXPECT_NE(ps->out.find("PID"), std::string::npos) << ps->out;
  EXPECT_GE(std::count(ps->out.begin(), ps->out.end(), '\n'), 3) << "header, sleep and the e3 exec: " << ps->out;

  auto metrics = Ctr({"task", "metrics", "sleeper"});
  ASSERT_OK(metrics);
  EXPECT_EQ(metrics->exit_code, 0) << metrics->err;
  EXPECT_NE(metrics->out.find("pids.current"), std::string::npos) << "cgroups v2 metrics: " << metrics->out;

  auto events = SubscribeEvents("kill");
  ASSERT_OK(events);
  auto kill = Ctr({"task", "kill", "-s", "SIGKILL", "sleeper"});
  ASSERT_OK(kill);
  EXPECT_EQ(kill->exit_code, 0) << kill->err;
  auto exited = events->WaitForOutput("\"id\":\"sleeper\"", std::chrono::seconds(60));  // the init's /tasks/exit
  EXPECT_OK(exited);
  events->Stop();
  auto after = Ctr({"task", "kill", "-s", "SIGKILL", "sleeper"});
  ASSERT_OK(after);
  EXPECT_NE(after->exit_code, 0) << "kill of an exited task fails (NotFound)";

  ASSERT_NO_FATAL_FAILURE(RemoveTaskAndContainer("sleeper"));
}

// `--log-uri file:///path`: containerd hands the shim the URI as both stdout
// and stderr, and the shim appends both streams to that file itself (ctr
// prints nothing). The output is in the file once `ctr run` returned: the
// shim drains it before it reports the exit.
TEST_F(CtrE2eTest, RunWithFileLogUriAppendsBothStreamsToTheFile) {
  auto tmp = TempDir::Create("ctr-e2e-file", env_->dir());
  ASSERT_OK(tmp);
  const std::string log = tmp->Join("sub dir/task.log");  // a parent to create, a space to escape
  auto r = Run("filelog", {"sh", "-c", "echo out; echo err >&2"}, false, {"--log-uri", "file://" + UriPath(log)});
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 0) << "stderr: " << r->err;
  EXPECT_EQ(r->out, "") << "the output went to the file, not to ctr";
  auto content = ReadFile(log);
  ASSERT_OK(content);
  // Two streams copied by two threads into one file: either order.
  EXPECT_TRUE(*content == "out\nerr\n" || *content == "err\nout\n") << "log file: \"" << *content << "\"";
}

// `--log-uri binary:///path?key=value`: the shim runs the logging binary
// (argv: path, key, value) with CONTAINER_ID and CONTAINER_NAMESPACE set,
// stdout's pipe on fd 3, stderr's on fd 4, and waits for it to close fd 5.
// The logger here writes each stream to its own file; they are complete
// once `ctr run --rm` returned (the shim's Delete waits for the logger to
// drain and exit), and the logger is gone.
TEST_F(CtrE2eTest, RunWithBinaryLogUriFeedsTheLoggingBinary) {
  auto tmp = TempDir::Create("ctr-e2e-binary", env_->dir());
  ASSERT_OK(tmp);
  const std::string logger = tmp->Join("logger.sh");
  const std::string out = tmp->Join("captured");
  // No PATH in a logger's environment: absolute paths only.
  ASSERT_TRUE(WriteFile(logger,
                        "#!/bin/sh\n"
                        "[ \"$1\" = out ] || exit 2\n"
                        "echo \"$CONTAINER_NAMESPACE/$CONTAINER_ID\" > \"$2.env\"\n"
                        "exec 5>&-\n"  // ready; before the readers start, or they would inherit fd 5
                        "/bin/cat <&3 > \"$2.stdout\" &\n"
                        "/bin/cat <&4 > \"$2.stderr\" &\n"
                        "exec 3<&- 4<&-\n"
                        "wait\n")
                  .ok());
  ASSERT_EQ(::chmod(logger.c_str(), 0755), 0);
  auto r = Run("binlog", {"sh", "-c", "echo out; echo err >&2"}, false,
               {"--log-uri", "binary://" + UriPath(logger) + "?out=" + UriPath(out)});
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_code, 0) << "stderr: " << r->err;
  EXPECT_EQ(r->out, "") << "the output went to the logger, not to ctr";
  for (const auto& [suffix, want] : std::vector<std::pair<std::string, std::string>>{
           {".env", std::string(kNs) + "/binlog\n"}, {".stdout", "out\n"}, {".stderr", "err\n"}}) {
    auto content = ReadFile(out + suffix);
    ASSERT_OK(content);
    EXPECT_EQ(*content, want) << out << suffix;
  }
  EXPECT_TRUE(E2eEnv::Processes({logger}).empty()) << "the logging binary exited";
}

// containerd runs `containerd-shim-capsule-v2 delete` when a shim's
// connection drops; for a shim that died (SIGKILL) that must stop the VM it
// left, adopted from its state dir, and undo its mounts.
TEST_F(CtrE2eTest, DeleteCleansUpAfterAKilledShim) {
  auto r = Run("orphan", {"sleep", "600"}, /*detach=*/true);
  ASSERT_OK(r);
  ASSERT_EQ(r->exit_code, 0) << r->err;
  const std::vector<pid_t> shims = ShimsOf("orphan");
  ASSERT_EQ(shims.size(), 1u) << "one shim daemon for the task";
  ASSERT_FALSE(E2eEnv::Processes({env_->state_dir()}).empty()) << "the VM's processes run";

  auto events = SubscribeEvents("dead-shim");
  ASSERT_OK(events);
  ASSERT_EQ(::kill(shims[0], SIGKILL), 0);
  // containerd publishes the task's exit once `delete` returned.
  auto exited = events->WaitForOutput("/tasks/exit", std::chrono::seconds(90));
  EXPECT_OK(exited);
  events->Stop();
  EXPECT_TRUE(E2eEnv::Processes({env_->state_dir()}).empty()) << "delete stopped the dead shim's VM";
  const std::string log = ctrd_->LogTail(65536);
  EXPECT_NE(log.find("cleaning up dead shim"), std::string::npos) << log;
  EXPECT_EQ(log.find("failed to clean up after shim disconnected"), std::string::npos) << log;
  if (std::getenv("E2E_PRINT_LOG") != nullptr) std::cout << log;

  auto rm = Ctr({"task", "rm", "orphan"});
  ASSERT_OK(rm);
  auto crm = Ctr({"containers", "rm", "orphan"});
  ASSERT_OK(crm);
  EXPECT_EQ(crm->exit_code, 0) << crm->err;
}

// The shim SIGKILLed while its VM cold-boots (QEMU, virtiofsd and the vsock
// back end started, the agent not answering yet): containerd's `shim
// delete` stops what it left, and the same id runs again.
TEST_F(CtrE2eTest, AShimKilledMidBootLeavesNothingAndTheIdRunsAgain) {
  auto run = std::async(std::launch::async, [this] { return Run("midboot", {"echo", "never"}, /*detach=*/true); });
  pid_t shim = 0;
  bool qemu = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while ((shim == 0 || !qemu) && std::chrono::steady_clock::now() < deadline) {
    if (auto shims = ShimsOf("midboot"); !shims.empty()) shim = shims.back();
    for (const auto& [pid, cmd] : E2eEnv::Processes({env_->state_dir()})) {
      if (cmd.find("qemu-system") != std::string::npos) qemu = true;
    }
    if (shim == 0 || !qemu) ::usleep(20 * 1000);
  }
  ASSERT_GT(shim, 0) << "no shim for midboot";
  ASSERT_TRUE(qemu) << "the VM's QEMU never started";
  ASSERT_EQ(run.wait_for(std::chrono::seconds(0)), std::future_status::timeout) << "the task started before the kill";
  ASSERT_EQ(::kill(shim, SIGKILL), 0);
  auto r = run.get();
  ASSERT_OK(r);
  EXPECT_NE(r->exit_code, 0) << "ctr run succeeded although its shim was killed";

  auto left = E2eEnv::Processes({env_->state_dir()});
  for (int i = 0; i < 600 && !left.empty(); ++i) {  // containerd's clean-up runs `delete`
    ::usleep(100 * 1000);
    left = E2eEnv::Processes({env_->state_dir()});
  }
  EXPECT_TRUE(left.empty()) << left.size() << " VM processes outlived the killed shim, first: " << left.front().second;
  (void)Ctr({"task", "rm", "-f", "midboot"});  // containerd may have no task left
  auto crm = Ctr({"containers", "rm", "midboot"});
  ASSERT_OK(crm);
  EXPECT_EQ(crm->exit_code, 0) << crm->err;

  auto again = Run("midboot", {"echo", "again"});
  ASSERT_OK(again);
  EXPECT_EQ(again->exit_code, 0) << again->err;
  EXPECT_EQ(again->out, "again\n");
}

}  // namespace
}  // namespace capsule::testing
