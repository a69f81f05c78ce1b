#include "runtime/common/logging.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include "runtime/common/file_util.h"

namespace capsule::log {
namespace {

TEST(LoggingTest, OneLinePerEventWithComponentAndLevelFilter) {
  auto dir = TempDir::Create("log");
  ASSERT_TRUE(dir.ok());
  int fd = ::open(dir->Join("log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  int old_fd = GetFd();
  Level old_level = GetLevel();
  SetFd(fd);
  SetLevel(Level::kInfo);
  Logger logger("ttrpc");
  logger.Debug("hidden {}", 1);
  logger.Info("accepted fd={}", 7);
  logger.Error("two\nlines");
  SetFd(old_fd);
  SetLevel(old_level);
  ::close(fd);
  std::string text = *ReadFile(dir->Join("log"));
  EXPECT_EQ(text.find("hidden"), std::string::npos);
  EXPECT_NE(text.find(" info ttrpc: accepted fd=7\n"), std::string::npos);
  EXPECT_NE(text.find(" error ttrpc: two lines\n"), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
}

TEST(LoggingTest, ParseLevel) {
  EXPECT_EQ(ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(ParseLevel("warning"), Level::kWarn);
  EXPECT_FALSE(ParseLevel("loud").has_value());
}

}  // namespace
}  // namespace capsule::log
