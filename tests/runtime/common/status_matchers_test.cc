// The test helpers of tests/support/status_matchers.h fail when they should
// and say why.
#include "tests/support/status_matchers.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <memory>

namespace capsule {
namespace {

Result<std::unique_ptr<int>> Make(bool ok) {
  if (!ok) return NotFound("no int here");
  return std::make_unique<int>(7);
}

TEST(StatusMatchersTest, OkPassesAndAFailureNamesTheExpressionAndTheStatus) {
  EXPECT_OK(Status::Ok());
  EXPECT_OK(Make(true));
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(Make(false)), "Make(false): NOT_FOUND: no int here");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(InvalidArgument("bad")) << "while testing", "while testing");
  EXPECT_FATAL_FAILURE(ASSERT_OK(Internal("boom")), "Internal(\"boom\"): INTERNAL: boom");
}

TEST(StatusMatchersTest, AssignUnwrapsOrFails) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<int> v, Make(true));
  EXPECT_EQ(*v, 7);
  EXPECT_FATAL_FAILURE(
      {
        ASSERT_OK_AND_ASSIGN(auto w, Make(false));
        (void)w;
      },
      "NOT_FOUND");
}

}  // namespace
}  // namespace capsule
