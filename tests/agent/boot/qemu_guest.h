// Test harness: boots the built guest kernel + initrd in real QEMU (TCG on
// this machine, see HOST-NOTES.md) with the command line the host will use,
// reads the serial console as it arrives, and talks QMP for the few
// commands a test needs. QEMU is a ChildProcess: a failing test kills it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/status.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::testing {

struct GuestBootOptions {
  std::string kernel;  // default $CAPSULE_BUILD_DIR/deploy/vmlinuz
  std::string initrd;  // default $CAPSULE_BUILD_DIR/deploy/capsule-initrd.img
  std::string extra_append;  // appended to guest_abi::kBaseKernelCmdline
  int memory_mib = 256;
  int vcpus = 1;
  // Appended to QEMU's command line (devices: vsock, virtio-fs).
  std::vector<std::string> extra_qemu_args;
  // The agent token, as fw_cfg guest_abi::kAgentTokenFwCfgName: the agent
  // as PID 1 admits no connection without one. On QEMU's command line,
  // where the product never puts it (it passes a sealed memfd).
  std::string agent_token;
};

class QemuGuest {
 public:
  static Result<std::unique_ptr<QemuGuest>> Boot(const GuestBootOptions& options);
  QemuGuest(TempDir dir, std::vector<std::string> argv) : dir_(std::move(dir)), argv_(std::move(argv)) {}

  // The QEMU command line used, for reports.
  std::string CommandLine() const;

  // Reads the console until a line containing `needle` arrives; returns it.
  // DEADLINE_EXCEEDED (with the log so far in the message) after `timeout`,
  // UNAVAILABLE if QEMU closes the console first.
  Result<std::string> WaitForLine(std::string_view needle, std::chrono::milliseconds timeout);
  // Everything read from the console so far.
  const std::string& console() const { return console_; }
  // Host time from QEMU's start to the arrival of the line holding `needle`.
  std::optional<std::chrono::milliseconds> ArrivalOf(std::string_view needle) const;

  // QMP send-key ctrl-alt-delete: the guest kernel turns it into SIGINT to PID 1.
  Status SendCtrlAltDel();
  // Waits for QEMU to exit (reading the rest of the console); its exit code.
  Result<int> WaitExit(std::chrono::milliseconds timeout);

 private:
  Status Start();
  Status ReadSome(int timeout_ms);  // appends console output; UNAVAILABLE at EOF
  Result<std::string> Qmp(const std::string& command_json);

  TempDir dir_;
  std::vector<std::string> argv_;
  std::optional<ChildProcess> qemu_;
  UniqueFd console_fd_;
  std::string console_;
  std::chrono::steady_clock::time_point started_;
  std::vector<std::pair<std::chrono::steady_clock::time_point, size_t>> arrivals_;  // (when, console size)
  UniqueFd qmp_;
};

}  // namespace capsule::agent::testing
