#include "runtime/vm/log_guard.h"

#include "runtime/common/logging.h"
#include "runtime/host/log_trim.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/virtiofs/virtiofs_daemon.h"
#include "runtime/vsock/vsock_backend.h"

namespace capsule::vm {
namespace {

const log::Logger kLogGuardLog("vm.logs");

}  // namespace

LogGuard::LogGuard(std::string vm_id, std::vector<std::string> files, LogGuardOptions options)
    : vm_id_(std::move(vm_id)), files_(std::move(files)), options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

LogGuard::~LogGuard() {
  {
    std::lock_guard l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<std::string> LogGuard::GuestWritableLogs(const std::string& state_dir) {
  hypervisor::VmPaths vm(state_dir);
  return {vm.console_log(), vm.vmm_log(), virtiofs::VirtiofsPaths(state_dir).log(),
          state_dir + "/" + vsock::kVsockdLogName};
}

void LogGuard::CheckNow() {
  std::lock_guard l(check_mu_);
  for (const std::string& f : files_) {
    auto trim = TrimLogFile(f, options_.max_bytes, options_.keep_bytes);
    if (!trim.ok()) {
      if (warnings_.Allow()) kLogGuardLog.Warn("VM {}: cannot bound log: {}", vm_id_, trim.status().ToString());
      continue;
    }
    if (trim->dropped == 0) continue;
    dropped_ += trim->dropped;
    if (warnings_.Allow())
      kLogGuardLog.Warn(
          "VM {}: {} reached {} bytes (limit {}): dropped its first {} bytes ({} from this VM's logs so far)", vm_id_,
          f, trim->size_before, options_.max_bytes, trim->dropped, dropped_.load());
  }
}

void LogGuard::Loop() {
  std::unique_lock l(mu_);
  while (!cv_.wait_for(l, options_.interval, [this] { return stopping_; })) {
    l.unlock();
    CheckNow();
    l.lock();
  }
}

}  // namespace capsule::vm
