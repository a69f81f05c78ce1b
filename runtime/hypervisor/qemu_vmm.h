// QemuVmm: one running (or adopted) QEMU. A watch thread polls the VMM's
// pidfd, so a VMM that dies is noticed at once and reported with the tails
// of the console and QEMU logs; QMP carries every command. Operations are
// serialized; the lifecycle is an explicit state machine.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/unique_fd.h"
#include "runtime/hypervisor/hypervisor.h"
#include "runtime/hypervisor/qemu_devices.h"
#include "runtime/hypervisor/qmp_client.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_record.h"

namespace capsule::hypervisor {

class QemuVmm final : public Vmm {
 public:
  struct Parts {
    VmRecord record;
    VmLock lock;
    UniqueFd pidfd;                    // invalid when the VMM is already gone
    std::unique_ptr<QmpClient> qmp;    // null when the VMM is already gone
    VmState state = VmState::kPaused;
    std::optional<VmExit> exited;      // set when adopting a dead VM
  };

  explicit QemuVmm(Parts parts);
  ~QemuVmm() override;

  const std::string& id() const override { return record_.spec.id; }
  const std::string& state_dir() const override { return record_.spec.state_dir; }
  pid_t vmm_pid() const override { return record_.vmm.pid; }
  Accelerator accelerator() const override { return record_.accelerator; }
  VmState state() const override;
  const std::vector<Device>& boot_devices() const override { return record_.spec.devices; }
  const std::string& agent_token() const override { return record_.spec.agent_token; }

  Status Pause() override;
  Status Resume() override;
  Status Stop(std::chrono::milliseconds graceful) override;
  Status HotplugDevice(const Device& device) override;
  Status UnplugDevice(const std::string& device_id, std::chrono::milliseconds timeout) override;
  // QMP getfd; netdev_add fd=<name> takes it out of QEMU's list again.
  Status PassFd(const std::string& fd_name, int fd) override;
  // qemu_migration.cc: QMP migrate / migrate-incoming over a passed fd.
  Status SaveState(int fd, std::chrono::milliseconds timeout) override;
  Status LoadState(int fd, std::chrono::milliseconds timeout) override;
  // Every fd of the VMM that is a memfd of at least 1 MiB (the RAM backend;
  // the agent token's memfd is smaller), opened O_PATH so nothing of the
  // VMM's choosing is opened for real.
  std::vector<UniqueFd> ReferenceGuestRam() const override;
  int exit_fd() const override { return pidfd_.get(); }
  void OnExit(ExitCallback callback) override;
  std::optional<VmExit> WaitExit(std::optional<std::chrono::milliseconds> timeout) override;
  Status Detach() override;

  // QEMU-specific access for callers that need a raw command. Null once the
  // VM has exited or been detached.
  QmpClient* qmp() { return qmp_.get(); }
  // Devices hot-plugged so far, with their ports.
  std::vector<HotpluggedDevice> hotplugged() const;

 private:
  Status CheckOp(std::string_view op, std::initializer_list<VmState> allowed) const;
  void WatchLoop();
  void HandleVmmExit();
  // Records the exit once and runs the exit callbacks outside the lock.
  void FinishExit(VmExit e);
  VmExit BuildExit(bool requested);
  void OnQmpEvent(const QmpEvent& event);
  Status TerminateVmm(std::chrono::milliseconds graceful, bool guest_running);
  void StopWatcher();
  Status PersistRecord();
  Result<std::string> FreePort() const;
  Status RunSteps(const std::vector<QmpStep>& steps);
  // The fdset a block device's fd went into (add-fd); 0 for the others.
  Result<uint64_t> PassDeviceFd(const Device& device);
  // Polls query-migrate until the stream completed, failed or `timeout`.
  Status AwaitMigration(std::string_view what, std::chrono::milliseconds timeout);
  std::string Who() const { return "VM " + record_.spec.id; }

  VmPaths paths_;
  UniqueFd pidfd_;
  UniqueFd wake_;  // eventfd: tells the watch thread to return
  std::unique_ptr<QmpClient> qmp_;
  std::thread watcher_;

  // One lifecycle operation at a time (Stop, Pause, hot-plug, Detach...).
  std::mutex op_mu_;
  VmLock lock_;  // guarded by op_mu_

  // Never held across a QMP call: the QMP reader thread takes it for events.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  VmRecord record_;                      // guarded by mu_ (hotplugged changes)
  VmState state_;                        // guarded by mu_
  bool stop_requested_ = false;          // guarded by mu_
  bool cleaned_ = false;                 // guarded by mu_: files removed
  std::string shutdown_reason_;          // guarded by mu_: from SHUTDOWN
  std::optional<VmExit> exit_;           // guarded by mu_
  std::vector<ExitCallback> callbacks_;  // guarded by mu_
};

}  // namespace capsule::hypervisor
