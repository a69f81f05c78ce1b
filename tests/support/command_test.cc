#include "tests/support/command.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

// A daemon that logs more than a pipe holds while the test is busy
// elsewhere must go on working: the pool daemon under the pod benches
// stalled mid-restore on a full pipe, and could not exit when stopped.
TEST(StreamingCommandTest, AChattyCommandGoesOnWhileTheTestReadsNothing) {
  auto dir = TempDir::Create("capsule-command-test");
  ASSERT_OK(dir);
  const std::string done = dir->Join("done");
  auto cmd = StreamingCommand::Start(
      {"/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo; echo last line; touch " + done + "; exec sleep 60"});
  ASSERT_OK(cmd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!PathExists(done) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(PathExists(done)) << "the command blocked on its output";
  auto out = cmd->WaitForOutput("last line", std::chrono::seconds(5));
  ASSERT_OK(out);
  EXPECT_EQ(out->size(), 300000u + 1 + 10);
  cmd->Stop(std::chrono::milliseconds(0));
  EXPECT_NE(cmd->output().find("last line"), std::string::npos) << "the output outlives the command";
}

TEST(StreamingCommandTest, WaitingForOutputEndsAtExitOrDeadlineWithTheOutput) {
  auto quiet = StreamingCommand::Start({"/bin/sh", "-c", "echo some; exec sleep 60"});
  ASSERT_OK(quiet);
  auto late = quiet->WaitForOutput("never", std::chrono::milliseconds(300));
  EXPECT_EQ(late.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(late.status().message().find("some"), std::string::npos) << late.status().ToString();
  auto gone = StreamingCommand::Start({"/bin/sh", "-c", "echo bye"});
  ASSERT_OK(gone);
  auto early = gone->WaitForOutput("never", std::chrono::seconds(20));
  EXPECT_EQ(early.status().code(), Code::kUnavailable);
  EXPECT_NE(early.status().message().find("bye"), std::string::npos) << early.status().ToString();
  auto status = gone->Wait(std::chrono::seconds(10));
  ASSERT_OK(status);
  EXPECT_EQ(ExitCode(*status), 0);
}

}  // namespace
}  // namespace capsule::testing
