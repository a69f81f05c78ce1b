#include "runtime/common/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include "runtime/common/file_util.h"

namespace capsule {
namespace {

using std::chrono::milliseconds;

TEST(SubprocessTest, ExitCodeAndStdoutRedirect) {
  auto dir = TempDir::Create("subproc");
  ASSERT_TRUE(dir.ok());
  UniqueFd out(::open(dir->Join("out").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(out);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo hi; exit 3"};
  o.stdout_fd = out.get();
  auto child = ChildProcess::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto st = child->Wait(milliseconds(10000));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(ExitCode(*st), 3);
  EXPECT_EQ(*ReadFile(dir->Join("out")), "hi\n");
}

TEST(SubprocessTest, MissingProgramIsAnError) {
  SpawnOptions o;
  o.argv = {"/nonexistent/prog"};
  auto child = ChildProcess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("/nonexistent/prog"), std::string::npos);
}

TEST(SubprocessTest, BadCwdReportsStep) {
  SpawnOptions o;
  o.argv = {"/bin/true"};
  o.cwd = "/nonexistent-dir";
  auto child = ChildProcess::Spawn(o);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.status().message().find("chdir"), std::string::npos);
}

TEST(SubprocessTest, WaitTimesOutThenDestructorKills) {
  pid_t pid;
  {
    SpawnOptions o;
    o.argv = {"/bin/sleep", "100"};
    auto child = ChildProcess::Spawn(o);
    ASSERT_TRUE(child.ok());
    pid = child->pid();
    auto st = child->Wait(milliseconds(50));
    EXPECT_EQ(st.status().code(), Code::kDeadlineExceeded);
  }
  // Reaped by the destructor: the pid no longer exists as our child.
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(::kill(pid, 0), -1);
}

TEST(SubprocessTest, TerminateReportsSignal) {
  SpawnOptions o;
  o.argv = {"/bin/sleep", "100"};
  auto child = ChildProcess::Spawn(o);
  ASSERT_TRUE(child.ok());
  int st = child->Terminate(milliseconds(2000));
  EXPECT_EQ(ExitCode(st), 128 + SIGTERM);
}

}  // namespace
}  // namespace capsule
