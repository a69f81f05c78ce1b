// ASSERT_OK / EXPECT_OK for a Status, a Result<T> or a grpc::Status: a failure names the
// expression and carries its status (code and message), so a test does not
// repeat `<< x.status().ToString()` after every check. More context streams
// in as with any gtest assertion: ASSERT_OK(st) << "while ...".
// ASSERT_OK_AND_ASSIGN(lhs, expr) unwraps a Result into `lhs` or fails.
// EXPECT_REASON(expr, reason) checks a failure by its reason, not its prose.
#pragma once

#include <gtest/gtest.h>

#include <string_view>
#include <utility>

#include "runtime/common/status.h"

namespace capsule::testing {

inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) {
  return r.status();
}

// grpc::Status, recognised by its members so this header needs no gRPC.
template <typename T>
concept GrpcStatusLike = requires(const T& s) {
  s.ok();
  s.error_code();
  s.error_message();
};

template <typename T>
::testing::AssertionResult IsOk(const char* text, const T& value) {
  if constexpr (GrpcStatusLike<T>) {
    if (value.ok()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << text << ": gRPC code " << static_cast<int>(value.error_code()) << ": "
                                         << value.error_message();
  } else {
    const Status& st = StatusOf(value);
    if (st.ok()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << text << ": " << st.ToString();
  }
}

// The status (of a Status or a Result<T>) failed with `reason`.
template <typename T>
::testing::AssertionResult HasReason(const char* text, const char* /*reason_text*/, const T& value,
                                     std::string_view reason) {
  const Status& st = StatusOf(value);
  if (!st.ok() && st.reason() == reason) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text << ": expected a failure with reason " << reason << ", got "
                                       << st.ToString();
}

}  // namespace capsule::testing

// EXPECT_REASON(r, kReasonX): `r` failed, and says why with reason kReasonX
// (whatever its message's words).
#define ASSERT_REASON(expr, reason) ASSERT_PRED_FORMAT2(::capsule::testing::HasReason, expr, reason)
#define EXPECT_REASON(expr, reason) EXPECT_PRED_FORMAT2(::capsule::testing::HasReason, expr, reason)

#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::capsule::testing::IsOk, expr)
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::capsule::testing::IsOk, expr)

#define CAPSULE_TEST_CONCAT_INNER_(a, b) a##b
#define CAPSULE_TEST_CONCAT_(a, b) CAPSULE_TEST_CONCAT_INNER_(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  CAPSULE_ASSERT_OK_AND_ASSIGN_IMPL_(CAPSULE_TEST_CONCAT_(capsule_result_, __LINE__), lhs, expr)
#define CAPSULE_ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                        \
  ASSERT_OK(tmp);                                           \
  lhs = *std::move(tmp)
