// LogGuard: keeps a running VM's log files within bounds while its owner
// holds it. The guest writes its serial console (console.log) as fast as
// it likes and can make QEMU, virtiofsd and capsule-vsockd log on its
// behalf; all four files sit in the VM's state dir on tmpfs. Once a second
// each file over `max_bytes` is cut to its last `keep_bytes`, with a
// rate-limited warning in the owner's log. A burst between two checks can
// still pass the limit by what the guest writes in one interval.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/rate_limiter.h"

namespace capsule::vm {

struct LogGuardOptions {
  uint64_t max_bytes = 1 << 20;
  uint64_t keep_bytes = 256 << 10;
  std::chrono::milliseconds interval{1000};
};

class LogGuard {
 public:
  LogGuard(std::string vm_id, std::vector<std::string> files, LogGuardOptions options = {});
  ~LogGuard();  // stops the thread
  LogGuard(const LogGuard&) = delete;
  LogGuard& operator=(const LogGuard&) = delete;

  // Bytes dropped from all files so far.
  uint64_t dropped_bytes() const { return dropped_.load(); }
  // Runs one check now (the thread's step); for tests and for callers that
  // are about to read a tail.
  void CheckNow();

  // The files of the VM in `state_dir` that a guest can make grow.
  static std::vector<std::string> GuestWritableLogs(const std::string& state_dir);

 private:
  void Loop();

  const std::string vm_id_;
  const std::vector<std::string> files_;
  const LogGuardOptions options_;
  std::atomic<uint64_t> dropped_{0};
  // A guest that floods its console all the time gets one line a minute.
  RateLimiter warnings_{1, std::chrono::minutes(1)};
  std::mutex check_mu_;  // one CheckNow at a time
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace capsule::vm
