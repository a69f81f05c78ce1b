// /proc/<pid>/stat and cmdline: fields counted from the last ')', numbers
// checked, and this very process read back.
#include "runtime/host/proc_stat.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/host/daemon.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

TEST(ProcStatTest, FieldsCountFromTheLastParenthesis) {
  // comm "a) (b c" holds ') (' and spaces; fields 3.. follow the last ')'.
  std::string text = "42 (a) (b c) S 1 42 42 0 -1 4194560 100 0 0 0 7 9 0 0 20 0 1 0 123456 1000 10";
  auto s = ParseProcStat(text, "stat");
  ASSERT_OK(s);
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->utime_ticks, 7u);
  EXPECT_EQ(s->stime_ticks, 9u);
  EXPECT_EQ(s->start_time, 123456u);
  EXPECT_EQ(s->flags, 4194560u);
}

TEST(ProcStatTest, ADyingProcessIsExitingBeforeItsPidGoes) {
  EXPECT_FALSE(ProcessExiting(::getpid()));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Exited, not reaped: a zombie still has its pid.
  for (int i = 0; i < 500; ++i) {
    auto st = ReadProcStat(child);
    if (st.ok() && st->state == 'Z') break;
    ::usleep(2000);
  }
  EXPECT_TRUE(ProcessExiting(child));
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(ProcessExiting(child)) << "a gone process";
  // PF_EXITING alone says so too.
  auto parsed = ParseProcStat("42 (x) R 1 42 42 0 -1 4194564 100 0 0 0 7 9 0 0 20 0 1 0 5", "stat");
  ASSERT_OK(parsed);
  EXPECT_NE(parsed->flags & kProcFlagExiting, 0u);
}

TEST(ProcStatTest, MalformedTextIsNamed) {
  EXPECT_EQ(ParseProcStat("42 no parenthesis S 1", "/proc/42/stat").status().message(),
            "malformed /proc/42/stat: no ')' after the command name");
  EXPECT_EQ(ParseProcStat("42 (x) S 1 2", "stat").status().message(), "malformed stat: field 6 is missing");
  EXPECT_EQ(ParseProcStat("42 (x) S 1 42 42 0 -1 4194560 100 0 0 0 7x 9 0 0 20 0 1 0 5", "stat").status().message(),
            "malformed stat: field 14 is not a number");
}

TEST(ProcStatTest, ThisProcessReadsBackAndAGoneOneIsNotFound) {
  auto s = ReadProcStat(::getpid());
  ASSERT_OK(s);
  EXPECT_EQ(s->state, 'R');
  auto id = IdentifyProcess(::getpid());
  ASSERT_OK(id);
  EXPECT_EQ(id->start_time, s->start_time);
  auto args = ReadCmdline(::getpid());
  ASSERT_OK(args);
  ASSERT_FALSE(args->empty());
  EXPECT_NE(args->front().find("runtime_unit_test"), std::string::npos) << args->front();
  // pid_max is at most 2^22: this pid never exists.
  EXPECT_EQ(ReadProcStat(1 << 23).status().code(), Code::kNotFound);
  EXPECT_EQ(ReadCmdline(1 << 23).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace capsule
