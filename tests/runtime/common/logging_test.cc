#include "runtime/common/logging.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::log {
namespace {

TEST(LoggingTest, OneLinePerEventWithComponentAndLevelFilter) {
  auto dir = TempDir::Create("log");
  ASSERT_OK(dir);
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

// Log lines quote guests and tenants: a terminal or log viewer showing them
// must not act on their escape sequences, and one line stays bounded.
TEST(LoggingTest, ControlBytesAreEscapedAndALongMessageIsCut) {
  auto dir = TempDir::Create("log");
  ASSERT_OK(dir);
  int fd = ::open(dir->Join("log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  int old_fd = GetFd();
  SetFd(fd);
  Logger logger("shim");
  logger.Warn("guest said: {}", "\x1b]0;owned\x07\x1b[2J\rdone\ttabbed \xc3\xa9t\xc3\xa9 \xc2\x9b \xff");
  logger.Warn("{}", std::string(kMaxMessageBytes + 100, 'x'));
  SetFd(old_fd);
  ::close(fd);
  std::string text = *ReadFile(dir->Join("log"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text.substr(0, 300);
  EXPECT_NE(text.find("guest said: \\x1b]0;owned\\x07\\x1b[2J\\x0ddone\ttabbed \xc3\xa9t\xc3\xa9 \\xc2\\x9b \\xff\n"),
            std::string::npos)
      << text.substr(0, 300);
  for (char c : text) EXPECT_TRUE(c == '\n' || c == '\t' || static_cast<unsigned char>(c) >= 0x20) << int(c);
  EXPECT_NE(text.find(std::string(kMaxMessageBytes, 'x') + "... (100 more bytes)\n"), std::string::npos);
}

TEST(LoggingTest, ParseLevel) {
  EXPECT_EQ(ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(ParseLevel("warning"), Level::kWarn);
  EXPECT_FALSE(ParseLevel("loud").has_value());
}

}  // namespace
}  // namespace capsule::log
