#include "runtime/host/log_trim.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "runtime/common/unique_fd.h"

namespace capsule {

Result<LogTrim> TrimLogFile(const std::string& path, uint64_t max_bytes, uint64_t keep_bytes) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return LogTrim{};
    return ErrnoStatus("open log " + path);
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat log " + path);
  if (!S_ISREG(st.st_mode)) return InvalidArgument("log " + path + " is not a regular file")
      .WithReason(reason::kWrongFileType);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size <= max_bytes) return LogTrim{size, 0};
  keep_bytes = std::min(keep_bytes, size);
  std::string tail(keep_bytes, '\0');
  ssize_t n = ::pread(fd.get(), tail.data(), tail.size(), static_cast<off_t>(size - keep_bytes));
  if (n < 0) return ErrnoStatus("read log " + path);
  tail.resize(static_cast<size_t>(n));
  // Start at a line when there is one in the first quarter of what is kept.
  size_t nl = tail.find('\n');
  if (nl != std::string::npos && nl < tail.size() / 4) tail.erase(0, nl + 1);
  const uint64_t dropped = size - tail.size();
  if (::ftruncate(fd.get(), 0) != 0) return ErrnoStatus("truncate log " + path);
  std::string out = fmt::format("[capsule: log reached {} bytes (limit {}); the first {} were dropped]\n", size,
                                max_bytes, dropped);
  out += tail;
  RETURN_IF_ERROR(WriteAll(fd.get(), out, "log " + path));
  return LogTrim{size, dropped};
}

}  // namespace capsule
