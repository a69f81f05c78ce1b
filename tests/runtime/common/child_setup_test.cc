// SetUpChild in a forked child: which fds the exec'd program would inherit,
// at which numbers, and the failing step's name.
#include "runtime/common/child_setup.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace capsule {
namespace {

// Forks, applies `s`, and reports on its stdout (read from `out`) one byte per fd 3..63:
// 'o' open and inherited, 'c' open but closing on exec, '-' not open;
// then 'E' and the step when the set-up failed.
std::string InChild(const ChildSetup& s, int out, int out_w) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (auto failed = SetUpChild(s)) {
      char e[2] = {'E', static_cast<char>('0' + static_cast<int>(*failed))};
      (void)!::write(out_w, e, 2);  // stdout may not be in place
      ::_exit(1);
    }
    char line[61];
    for (int fd = 3; fd < 64; ++fd) {
      const int flags = ::fcntl(fd, F_GETFD);
      line[fd - 3] = flags < 0 ? '-' : (flags & FD_CLOEXEC) ? 'c' : 'o';
    }
    (void)!::write(1, line, sizeof line);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string got(64, '\0');
  const ssize_t n = ::read(out, got.data(), got.size());
  got.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return got;
}

class ChildSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    out_r_ = p[0];
    out_w_ = p[1];
    dev_null_ = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ASSERT_GE(dev_null_, 0);
  }
  void TearDown() override {
    for (int fd : {out_r_, out_w_, dev_null_}) ::close(fd);
  }
  ChildSetup Base() const {
    ChildSetup s;
    s.stdio[1] = out_w_;  // the report goes to the child's stdout
    s.dev_null = dev_null_;
    return s;
  }
  int out_r_ = -1, out_w_ = -1, dev_null_ = -1;
};

TEST_F(ChildSetupTest, OnlyKeptAndPlacedFdsSurviveWhenOthersClose) {
  const int inherited = ::open("/dev/null", O_RDONLY);  // no CLOEXEC of its own
  const int kept = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int source = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_TRUE(inherited >= 3 && inherited < 40 && kept < 40 && source < 40);
  ChildSetup s = Base();
  s.close_other_fds = true;
  s.keep_fds = &kept;
  s.keep_count = 1;
  const std::pair<int, int> extra{50, source};
  int scratch[1];
  s.extra_fds = &extra;
  s.extra_count = 1;
  s.scratch = scratch;
  const std::string got = InChild(s, out_r_, out_w_);
  ASSERT_EQ(got.size(), 61u) << got;
  EXPECT_EQ(got[static_cast<size_t>(kept - 3)], 'o') << "a kept fd is inherited";
  EXPECT_EQ(got[50 - 3], 'o') << "the extra fd lands at its number, inherited";
  EXPECT_EQ(got[static_cast<size_t>(inherited - 3)], 'c') << "an fd neither kept nor placed closes on exec";
  for (int fd : {inherited, kept, source}) ::close(fd);
}

TEST_F(ChildSetupTest, WithoutClosingOthersFdsKeepTheirOwnFlags) {
  const int inherited = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(inherited, 3);
  const std::string got = InChild(Base(), out_r_, out_w_);
  ASSERT_EQ(got.size(), 61u) << got;
  EXPECT_EQ(got[static_cast<size_t>(inherited - 3)], 'o');
  EXPECT_EQ(got[static_cast<size_t>(out_w_ - 3)], 'c') << "stdout's source keeps its CLOEXEC";
  ::close(inherited);
}

TEST_F(ChildSetupTest, AFailedStepIsNamed) {
  ChildSetup s = Base();
  s.cwd = "/nonexistent/capsule-child-setup";
  EXPECT_EQ(InChild(s, out_r_, out_w_), std::string("E") + char('0' + static_cast<int>(ChildStep::kChdir)));
  EXPECT_STREQ(ChildStepName(ChildStep::kChdir), "chdir");
  s = Base();
  s.stdio[0] = 1000;  // not open
  EXPECT_EQ(InChild(s, out_r_, out_w_), std::string("E") + char('0' + static_cast<int>(ChildStep::kStdio)));
}

}  // namespace
}  // namespace capsule
