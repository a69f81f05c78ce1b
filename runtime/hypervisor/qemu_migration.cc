// QemuVmm::SaveState / LoadState: a VM's state written to and read from a
// file descriptor with QMP's migration commands (QEMU 7.2 has `fd:` and
// `exec:` transports, no `file:`). The fd travels by getfd under one name,
// which `migrate fd:NAME` / `migrate-incoming fd:NAME` take back out of
// QEMU's list. x-ignore-shared is on at both ends: RAM that is a shared
// file (a template's RAM image, a clone's copy of it) stays out of the
// stream, which then holds device state only (a few hundred KB). Progress
// is polled with query-migrate, which also reports the incoming side.
#include <fmt/format.h>


#include "runtime/common/backoff.h"
#include "runtime/common/logging.h"
#include "runtime/hypervisor/qemu_vmm.h"

namespace capsule::hypervisor {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const log::Logger kQemuMigrationLog("hypervisor");

constexpr const char* kMigrationFdName = "capsule-migration";
// query-migrate polling: a device-state stream takes a few milliseconds.
constexpr milliseconds kMigrationPoll{2};
// Once QEMU exited, how long to wait for its exit to be recorded.
constexpr milliseconds kExitReportWait{2000};

const json kIgnoreShared = json{{"capabilities", json::array({json{{"capability", "x-ignore-shared"}, {"state", true}}})}};

std::string MigrationError(const json& info) {
  auto it = info.find("error-desc");
  return it != info.end() && it->is_string() ? it->get<std::string>() : "no reason given";
}

}  // namespace

Status QemuVmm::AwaitMigration(std::string_view what, milliseconds timeout) {
  Status outcome;  // of the last query: an error or a final state ends the wait
  std::string status;
  const bool ended = WaitUntil(
      [&] {
        auto info = qmp_->Execute("query-migrate");
        if (!info.ok()) {
          outcome = info.status();
          return true;
        }
        status = info->value("status", std::string());
        if (status == "failed" || status == "cancelled")
          outcome = Internal(fmt::format("{}: migration {}: {}", what, status, MigrationError(*info)));
        return status == "completed" || !outcome.ok();
      },
      timeout, {kMigrationPoll, kMigrationPoll});
  if (ended) return outcome;
  (void)qmp_->Execute("migrate_cancel");
  return DeadlineExceeded(fmt::format("{}: not done after {} ms (status '{}')", what, timeout.count(), status));
}

Status QemuVmm::SaveState(int fd, milliseconds timeout) {
  std::lock_guard op(op_mu_);
  const std::string what = "save the state of " + Who();
  RETURN_IF_ERROR(CheckOp("save the state of", {VmState::kRunning, VmState::kPaused}));
  const auto start = Clock::now();
  if (state() == VmState::kRunning) {
    RETURN_IF_ERROR_CTX(qmp_->Execute("stop").status(), what);
    std::lock_guard lock(mu_);
    state_ = VmState::kPaused;
  }
  RETURN_IF_ERROR_CTX(qmp_->Execute("migrate-set-capabilities", kIgnoreShared).status(), what);
  RETURN_IF_ERROR_CTX(qmp_->ExecuteWithFd("getfd", json{{"fdname", kMigrationFdName}}, fd).status(), what);
  RETURN_IF_ERROR_CTX(qmp_->Execute("migrate", json{{"uri", fmt::format("fd:{}", kMigrationFdName)}}).status(), what);
  RETURN_IF_ERROR(AwaitMigration(what, timeout));
  kQemuMigrationLog.Info("{}: done in {} ms", what,
                         std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
  return Status::Ok();
}

Status QemuVmm::LoadState(int fd, milliseconds timeout) {
  std::lock_guard op(op_mu_);
  const std::string what = "load the state of " + Who();
  RETURN_IF_ERROR(CheckOp("load the state of", {VmState::kPaused}));
  if (!record_.spec.incoming) return FailedPrecondition(what + ": it was not launched to receive one (incoming)");
  const auto start = Clock::now();
  Status st = qmp_->Execute("migrate-set-capabilities", kIgnoreShared).status();
  if (st.ok()) st = qmp_->ExecuteWithFd("getfd", json{{"fdname", kMigrationFdName}}, fd).status();
  if (st.ok()) st = qmp_->Execute("migrate-incoming", json{{"uri", fmt::format("fd:{}", kMigrationFdName)}}).status();
  if (st.ok()) st = AwaitMigration(what, timeout);
  if (st.ok()) {
    kQemuMigrationLog.Info("{}: done in {} ms", what,
                           std::chrono::duration_cast<milliseconds>(Clock::now() - start).count());
    return Status::Ok();
  }
  // QEMU exits when it cannot load a stream; its own words say why.
  if (PidfdWait(pidfd_.get(), static_cast<int>(kExitReportWait.count()))) {
    VmExit e = BuildExit(false);
    return Unavailable(fmt::format("{}: QEMU exited: {}", what, e.vmm_log_tail.empty() ? st.message() : e.vmm_log_tail));
  }
  return std::move(st).WithContext(what);
}

}  // namespace capsule::hypervisor
