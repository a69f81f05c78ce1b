#include "runtime/common/reasons.h"
#include "runtime/common/status.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

#include <set>
#include <string_view>

namespace capsule {
namespace {

Result<int> Half(int v) {
  if (v % 2 != 0) return InvalidArgument("odd value " + std::to_string(v));
  return v / 2;
}

Result<int> Quarter(int v) {
  ASSIGN_OR_RETURN(int h, Half(v));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status Step(bool fail) {
  RETURN_IF_ERROR_CTX(fail ? NotFound("no such thing") : Status::Ok(), "step");
  return Status::Ok();
}

TEST(StatusTest, ContextIsPrefixedAndCodeKept) {
  Status s = NotFound("container c1").WithContext("delete");
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "delete: container c1");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: delete: container c1");
  EXPECT_OK(Status::Ok().WithContext("x"));
}

TEST(StatusTest, ErrnoMapsToCodes) {
  EXPECT_EQ(ErrnoStatus("open /x", ENOENT).code(), Code::kNotFound);
  EXPECT_EQ(ErrnoStatus("mkdir /x", EEXIST).code(), Code::kAlreadyExists);
  EXPECT_EQ(ErrnoStatus("mount", EPERM).code(), Code::kPermissionDenied);
  EXPECT_NE(ErrnoStatus("open /x", ENOENT).message().find("open /x: No such file"), std::string::npos);
}

TEST(StatusTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd value 3");
  EXPECT_EQ(Step(true).message(), "step: no such thing");
  EXPECT_OK(Step(false));
}

TEST(StatusTest, AReasonSurvivesContextAndShowsInToString) {
  Status s = FailedPrecondition("cannot go from running to deleted")
      .WithReason("PROCESS_STATE").WithContext("delete c1");
  EXPECT_EQ(s.reason(), "PROCESS_STATE");
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.ToString(), "FAILED_PRECONDITION [PROCESS_STATE]: delete c1: cannot go from running to deleted");
  EXPECT_REASON(s, "PROCESS_STATE");
  EXPECT_EQ(NotFound("x").reason(), "") << "no reason unless one is given";
  EXPECT_EQ(Status::Ok().WithReason("PROCESS_STATE").reason(), "") << "OK stays unnamed";
  EXPECT_NE(s, FailedPrecondition(s.message())) << "the reason is part of equality";
}

TEST(StatusTest, WithMessageKeepsCodeAndReason) {
  Status s = Unavailable("QEMU exited").WithReason("VMM_EXITED").WithMessage("QEMU exited; QEMU said: no");
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(s.reason(), "VMM_EXITED");
  EXPECT_EQ(s.message(), "QEMU exited; QEMU said: no");
  EXPECT_OK(Status::Ok().WithMessage("x")) << "OK stays OK";
}

TEST(StatusTest, ReasonNamesAreUpperSnakeOfAtMost63) {
  EXPECT_TRUE(IsReasonName("A"));
  EXPECT_TRUE(IsReasonName("EXECUTABLE_NOT_FOUND"));
  EXPECT_TRUE(IsReasonName(std::string(63, 'X')));
  EXPECT_FALSE(IsReasonName(""));
  EXPECT_FALSE(IsReasonName(std::string(64, 'X')));
  EXPECT_FALSE(IsReasonName("lower"));
  EXPECT_FALSE(IsReasonName("_LEADING"));
  EXPECT_FALSE(IsReasonName("9LIVES"));
  EXPECT_FALSE(IsReasonName("NEW\nLINE"));
  EXPECT_FALSE(IsReasonName("SP ACE"));
}

TEST(StatusTest, EveryReasonIsWellFormedAndHasOneName) {
  std::set<std::string_view> seen;
  for (std::string_view r : reason::kAll) {
    EXPECT_TRUE(IsReasonName(r)) << r;
    EXPECT_TRUE(seen.insert(r).second) << r << " is listed twice";
  }
}

TEST(StatusDeathTest, AnInvalidReasonIsAProgrammingError) {
  EXPECT_DEATH((void)Internal("x").WithReason("not upper"), "");
}

}  // namespace
}  // namespace capsule
