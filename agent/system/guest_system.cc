// Thin syscall wrappers with argument checks and errors naming the call.
#include "agent/system/guest_system.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/random.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <time.h>

#include <cstring>
#include <vector>

#include "runtime/common/unique_fd.h"

namespace capsule::agent::system {

Status ValidateTime(int64_t seconds, int64_t nanos) {
  if (seconds < 0) return InvalidArgument(fmt::format("seconds {} is negative", seconds));
  if (nanos < 0 || nanos >= 1000000000) return InvalidArgument(fmt::format("nanos {} is outside 0..999999999", nanos));
  return Status::Ok();
}

Status SetRealtimeClock(int64_t seconds, int64_t nanos) {
  RETURN_IF_ERROR(ValidateTime(seconds, nanos));
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>(nanos);
  if (::clock_settime(CLOCK_REALTIME, &ts) != 0) return ErrnoStatus("clock_settime(CLOCK_REALTIME)");
  return Status::Ok();
}

Status AddEntropy(std::string_view data) {
  if (data.empty()) return InvalidArgument("data is empty");
  if (data.size() > kMaxEntropyBytes) {
    return InvalidArgument(fmt::format("data is {} bytes, at most {}", data.size(), kMaxEntropyBytes));
  }
  // struct rand_pool_info ends in a flexible array: build it in a byte buffer.
  std::vector<unsigned char> buf(sizeof(rand_pool_info) + data.size());
  rand_pool_info info{};
  info.entropy_count = static_cast<int>(data.size() * 8);
  info.buf_size = static_cast<int>(data.size());
  std::memcpy(buf.data(), &info, sizeof info);
  std::memcpy(buf.data() + offsetof(rand_pool_info, buf), data.data(), data.size());
  UniqueFd fd(::open("/dev/random", O_WRONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open /dev/random");
  if (::ioctl(fd.get(), RNDADDENTROPY, buf.data()) != 0) return ErrnoStatus("ioctl RNDADDENTROPY on /dev/random");
  if (::ioctl(fd.get(), RNDRESEEDCRNG) != 0) return ErrnoStatus("ioctl RNDRESEEDCRNG on /dev/random");
  return Status::Ok();
}

std::string KernelRelease() {
  utsname u{};
  if (::uname(&u) != 0) return "unknown";
  return u.release;
}

uint64_t BootTimeMicros() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace capsule::agent::system
