#include "runtime/common/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstring>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

using std::chrono::milliseconds;

TEST(SubprocessTest, ExitCodeAndStdoutRedirect) {
  auto dir = TempDir::Create("subproc");
  ASSERT_OK(dir);
  UniqueFd out(::open(dir->Join("out").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(out);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo hi; exit 3"};
  o.stdout_fd = out.get();
  auto child = ChildProcess::Spawn(o);
  ASSERT_OK(child);
  auto st = child->Wait(milliseconds(10000));
  ASSERT_OK(st);
  EXPECT_EQ(ExitCode(*st), 3);
  EXPECT_EQ(*ReadFile(dir->Join("out")), "hi\n");
}

TEST(SubprocessTest, ExtraFdsLandAtTheirNumbersEvenWhenSwapped) {
  int a[2], b[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
  UniqueFd a_read(a[0]), b_read(b[0]);
  // Put the write ends at 40 and 41, then ask for them swapped: the child's
  // 40 is pipe b and its 41 is pipe a.
  UniqueFd a_write(::dup3(a[1], 40, O_CLOEXEC)), b_write(::dup3(b[1], 41, O_CLOEXEC));
  ::close(a[1]);
  ::close(b[1]);
  ASSERT_TRUE(a_write && b_write);
  SpawnOptions o;
  o.argv = {"/bin/bash", "-c", "echo to40 >&40; echo to41 >&41"};
  o.extra_fds = {{40, b_write.get()}, {41, a_write.get()}};
  auto child = ChildProcess::Spawn(o);
  ASSERT_OK(child);
  ASSERT_OK(child->Wait(milliseconds(10000)));
  a_write.reset();
  b_write.reset();
  char buf[64] = {};
  ASSERT_GT(::read(a_read.get(), buf, sizeof buf - 1), 0);
  EXPECT_STREQ(buf, "to41\n");
  std::memset(buf, 0, sizeof buf);
  ASSERT_GT(::read(b_read.get(), buf, sizeof buf - 1), 0);
  EXPECT_STREQ(buf, "to40\n");
}

TEST(SubprocessTest, ExtraFdsRejectStdioNumbers) {
  SpawnOptions o;
  o.argv = {"/bin/true"};
  o.extra_fds = {{1, 5}};
  EXPECT_EQ(ChildProcess::Spawn(o).status().code(), Code::kInvalidArgument);
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
    ASSERT_OK(child);
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
  ASSERT_OK(child);
  int st = child->Terminate(milliseconds(2000));
  EXPECT_EQ(ExitCode(st), 128 + SIGTERM);
}

}  // namespace
}  // namespace capsule
