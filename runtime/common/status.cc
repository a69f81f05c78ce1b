// Status formatting and errno mapping.
#include "runtime/common/status.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace capsule {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kCancelled: return "CANCELLED";
    case Code::kUnknown: return "UNKNOWN";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case Code::kNotFound: return "NOT_FOUND";
    case Code::kAlreadyExists: return "ALREADY_EXISTS";
    case Code::kPermissionDenied: return "PERMISSION_DENIED";
    case Code::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case Code::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Code::kAborted: return "ABORTED";
    case Code::kOutOfRange: return "OUT_OF_RANGE";
    case Code::kUnimplemented: return "UNIMPLEMENTED";
    case Code::kInternal: return "INTERNAL";
    case Code::kUnavailable: return "UNAVAILABLE";
    case Code::kDataLoss: return "DATA_LOSS";
    case Code::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

Status Status::WithContext(std::string_view context) const& {
  Status copy = *this;
  return std::move(copy).WithContext(context);
}

Status Status::WithContext(std::string_view context) && {
  if (ok()) return std::move(*this);
  message_ = std::string(context) + ": " + message_;
  return std::move(*this);
}

Status Status::WithMessage(std::string message) const& {
  Status copy = *this;
  if (!copy.ok()) copy.message_ = std::move(message);
  return copy;
}

bool IsReasonName(std::string_view reason) {
  if (reason.empty() || reason.size() > 63 || reason[0] < 'A' || reason[0] > 'Z') return false;
  for (char c : reason)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

Status Status::WithReason(std::string_view reason) const& {
  Status copy = *this;
  return std::move(copy).WithReason(reason);
}

Status Status::WithReason(std::string_view reason) && {
  if (!IsReasonName(reason)) std::abort();
  if (!ok()) reason_ = std::string(reason);
  return std::move(*this);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  if (reason_.empty()) return std::string(CodeName(code_)) + ": " + message_;
  return std::string(CodeName(code_)) + " [" + reason_ + "]: " + message_;
}

Status ErrnoStatus(std::string_view what, int err) {
  Code code = Code::kInternal;
  switch (err) {
    case ENOENT: case ESRCH: code = Code::kNotFound; break;
    case EEXIST: code = Code::kAlreadyExists; break;
    case EACCES: case EPERM: code = Code::kPermissionDenied; break;
    case EINVAL: case ENAMETOOLONG: case ENOTDIR: code = Code::kInvalidArgument; break;
    case ETIMEDOUT: code = Code::kDeadlineExceeded; break;
    case ENOMEM: case ENOSPC: case EMFILE: case ENFILE: code = Code::kResourceExhausted; break;
    case ECONNREFUSED: case ECONNRESET: case EPIPE: case EAGAIN: code = Code::kUnavailable; break;
    case ENOSYS: case EOPNOTSUPP: code = Code::kUnimplemented; break;
    default: break;
  }
  return Status(code, std::string(what) + ": " + std::strerror(err));
}

}  // namespace capsule
