// The hypervisor interface: a VMM driver (Hypervisor) launches or adopts VMs,
// each handled through a Vmm. QEMU implements it today (qemu_hypervisor.h);
// Firecracker or Cloud Hypervisor would implement the same two classes.
// A Vmm owns its VMM process and state dir: destroying a Vmm kills the VMM and
// removes its files, unless Detach() left it running for another process to
// Attach() (the warm pool hands VMs over this way).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/hypervisor/vm_spec.h"

namespace capsule::hypervisor {

enum class VmState {
  kRunning,   // guest executing
  kPaused,    // vCPUs stopped (start_paused, Pause())
  kStopping,  // Stop() in progress
  kExited,    // VMM process gone
  kDetached,  // handed off: this object no longer controls the VM
};
std::string_view VmStateName(VmState s);

// How and why the VMM exited.
struct VmExit {
  bool requested = false;  // Stop() asked for it
  // The VMM's shutdown reason when it gave one ("guest-shutdown",
  // "guest-reset", "host-qmp-quit", ...), else what we could observe.
  std::string reason;
  std::string console_tail;  // end of the guest's serial console log
  std::string vmm_log_tail;  // end of the VMM's own stderr log
  // One line plus the tails, for logs and error messages.
  std::string Describe(std::string_view vm_id) const;
};

class Vmm {
 public:
  using ExitCallback = std::function<void(const VmExit&)>;

  virtual ~Vmm() = default;

  virtual const std::string& id() const = 0;
  virtual const std::string& state_dir() const = 0;
  virtual pid_t vmm_pid() const = 0;
  virtual Accelerator accelerator() const = 0;
  virtual VmState state() const = 0;
  // The devices the VM was launched with (VmSpec::devices; never changes).
  virtual const std::vector<Device>& boot_devices() const = 0;
  // VmSpec::agent_token as launched ("" when none).
  virtual const std::string& agent_token() const = 0;

  virtual Status Pause() = 0;
  virtual Status Resume() = 0;
  // Graceful power-down (ACPI) for up to `graceful`, then the VMM is told to
  // quit, then killed. Removes the state dir's VMM files. Idempotent.
  virtual Status Stop(std::chrono::milliseconds graceful) = 0;

  // Adds a device to the running (or paused) VM; its id must be unused.
  virtual Status HotplugDevice(const Device& device) = 0;
  // Removes a hot-plugged device, waiting up to `timeout` for the guest to
  // release it (a paused or not yet started guest releases it at once).
  // Other operations, Stop included, do not wait for that; a Stop ends it.
  virtual Status UnplugDevice(const std::string& device_id, std::chrono::milliseconds timeout) = 0;
  // Hands the VMM a copy of `fd` under `fd_name` (IsValidFdName), for a
  // device added next that refers to it (NetDevice::fd_name: a tap in a pod
  // netns). The caller keeps its own fd. Reusing a name replaces the
  // earlier fd. INVALID_ARGUMENT for a bad name or a closed fd.
  virtual Status PassFd(const std::string& fd_name, int fd) = 0;

  // Writes the VM's device state to `fd` as one stream for LoadState,
  // pausing the VM first. Guest RAM in a shared file (VmSpec::memory_file)
  // is left out of it: that file is the other half of the state. The VM
  // stays paused and can only be stopped after.
  virtual Status SaveState(int fd, std::chrono::milliseconds timeout) = 0;
  // Reads a stream SaveState wrote into a VM launched with
  // VmSpec::incoming whose RAM already holds the source's (memory_fd or
  // memory_file). The VM is paused after. A stream the VMM refuses ends
  // the VMM (QEMU exits), reported with its own words.
  virtual Status LoadState(int fd, std::chrono::milliseconds timeout) = 0;

  // O_PATH references to the shared memory files behind the guest's RAM
  // (the running VMM's memfds). The last reference to such a file frees
  // its pages as it goes: held by the VM's owner past the VMM's exit, that
  // work (about 35 ms per 256 MiB here) leaves the exit, and with it the
  // stop, for the owner's CloseInBackground. Empty when the VMM is gone or
  // its fds cannot be read.
  virtual std::vector<UniqueFd> ReferenceGuestRam() const { return {}; }

  // Readable (POLLIN) as soon as the VMM process exits: for event loops.
  virtual int exit_fd() const = 0;
  // Called once, on an internal thread, when the VMM exits for any reason.
  // Do not destroy the Vmm from inside the callback. If the VM has already
  // exited the callback runs at once on the caller's thread.
  virtual void OnExit(ExitCallback callback) = 0;
  // Blocks until the VMM has exited (nullopt if `timeout` passed first).
  virtual std::optional<VmExit> WaitExit(std::optional<std::chrono::milliseconds> timeout) = 0;

  // Lets go of the VM without stopping it: QMP connection, watch thread and
  // ownership lock are released, the VMM and its state dir stay for Attach().
  virtual Status Detach() = 0;
};
using VmmPtr = std::unique_ptr<Vmm>;

class Hypervisor {
 public:
  virtual ~Hypervisor() = default;

  virtual std::string_view name() const = 0;
  // Starts a VM; returns once the VMM is ready for commands (and the guest
  // started unless spec.start_paused). On failure nothing is left behind and
  // the error carries the VMM's own message.
  virtual Result<VmmPtr> Launch(const VmSpec& spec) = 0;
  // Adopts a VM that another process (or an earlier Vmm object) launched and
  // detached. A VM whose VMM has meanwhile exited is returned in kExited so
  // that Stop() can clean it up. FAILED_PRECONDITION if another process owns it.
  virtual Result<VmmPtr> Attach(const std::string& state_dir) = 0;
};
using HypervisorPtr = std::unique_ptr<Hypervisor>;

}  // namespace capsule::hypervisor
