#include "runtime/common/status.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace capsule
