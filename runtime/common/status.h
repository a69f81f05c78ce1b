// Status and Result<T>: the error type every fallible Capsule call returns.
// Codes are gRPC's, so mapping to ttrpc/gRPC statuses is the identity, and
// messages gain context at each layer ("create container c1: mount proc: EPERM").
// Beside the code, a Status may carry a reason: a stable UPPER_SNAKE name of
// why it failed (google.rpc.ErrorInfo's `reason`), which callers and tests
// match instead of the message's prose. It survives WithContext and crosses
// gRPC (grpc_status.h).
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace capsule {

// Numbering from grpc/status.h and google/rpc/code.proto.
enum class Code : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // Empty when the failure has no name of its own.
  const std::string& reason() const { return reason_; }

  // Names why this failed. `reason` must be IsReasonName (a programming
  // error otherwise: it aborts); an OK status stays OK and unnamed.
  Status WithReason(std::string_view reason) const&;
  Status WithReason(std::string_view reason) &&;

  // Prefixes the message with what the caller was doing: "ctx: message".
  Status WithContext(std::string_view context) const&;
  Status WithContext(std::string_view context) &&;
  // The same code and reason with `message` in place of this one's: for a
  // layer that appends what it knows (a log tail) instead of prefixing.
  // Building a new Status from code() and message() would lose the reason.
  Status WithMessage(std::string message) const&;

  // "NOT_FOUND: container c1 not found", with the reason when there is one:
  // "FAILED_PRECONDITION [PROCESS_STATE]: cannot go from running to deleted"
  std::string ToString() const;

  bool operator==(const Status& other) const = default;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::string reason_;
};

// A reason is 1 to 63 characters of A-Z, 0-9 and '_', starting with a
// letter (ErrorInfo's rule). What a peer sends is checked with this.
bool IsReasonName(std::string_view reason);

inline Status InvalidArgument(std::string msg) { return {Code::kInvalidArgument, std::move(msg)}; }
inline Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
inline Status AlreadyExists(std::string msg) { return {Code::kAlreadyExists, std::move(msg)}; }
inline Status FailedPrecondition(std::string msg) { return {Code::kFailedPrecondition, std::move(msg)}; }
inline Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }
inline Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
inline Status Unimplemented(std::string msg) { return {Code::kUnimplemented, std::move(msg)}; }
inline Status DeadlineExceeded(std::string msg) { return {Code::kDeadlineExceeded, std::move(msg)}; }
inline Status ResourceExhausted(std::string msg) { return {Code::kResourceExhausted, std::move(msg)}; }
inline Status Cancelled(std::string msg) { return {Code::kCancelled, std::move(msg)}; }
inline Status PermissionDenied(std::string msg) { return {Code::kPermissionDenied, std::move(msg)}; }

// Status from errno after a failed syscall: "what: strerror(err)". The code
// follows the errno (ENOENT -> NOT_FOUND, EEXIST -> ALREADY_EXISTS, ...).
Status ErrnoStatus(std::string_view what, int err = errno);

// Result<T> holds a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const Status& status() const& {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  Status status() && { return ok() ? Status() : std::get<Status>(std::move(v_)); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace capsule

#define CAPSULE_CONCAT_INNER(a, b) a##b
#define CAPSULE_CONCAT(a, b) CAPSULE_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
// The temporaries are named per line so nesting (a lambda inside the
// expression using the macro again) does not shadow.
#define RETURN_IF_ERROR_IMPL(st, expr)    \
  do {                                    \
    ::capsule::Status st = (expr);        \
    if (!st.ok()) return st;              \
  } while (0)
#define RETURN_IF_ERROR(expr) RETURN_IF_ERROR_IMPL(CAPSULE_CONCAT(capsule_status_, __LINE__), expr)

// Like RETURN_IF_ERROR, adding context to the message.
#define RETURN_IF_ERROR_CTX_IMPL(st, expr, ctx)                \
  do {                                                         \
    ::capsule::Status st = (expr);                             \
    if (!st.ok()) return std::move(st).WithContext(ctx);       \
  } while (0)
#define RETURN_IF_ERROR_CTX(expr, ctx) \
  RETURN_IF_ERROR_CTX_IMPL(CAPSULE_CONCAT(capsule_status_, __LINE__), expr, ctx)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return std::move(tmp).status(); \
  lhs = std::move(tmp).value()

// `ASSIGN_OR_RETURN(auto fd, OpenFile(p));` binds the value or returns the Status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(CAPSULE_CONCAT(capsule_result_, __LINE__), lhs, expr)
