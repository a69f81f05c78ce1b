// The warm pool daemon as tests run it: `capsule-runtime --config C pool
// serve` from the build tree in a child process, and its API for waiting
// until it holds ready VMs. Killed (SIGKILL) or stopped (SIGTERM, which
// drains) on request; the destructor stops it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "runtime/common/status.h"
#include "runtime/pool/pool_client.h"
#include "tests/support/command.h"

namespace capsule::testing {

class PoolDaemonProcess {
 public:
  static Result<std::unique_ptr<PoolDaemonProcess>> Start(const std::string& config_path,
                                                          const std::string& socket_path);
  // Another daemon program (a test build), run as `argv... --config PATH`.
  static Result<std::unique_ptr<PoolDaemonProcess>> StartProgram(std::vector<std::string> argv,
                                                                 const std::string& config_path,
                                                                 const std::string& socket_path);
  ~PoolDaemonProcess();

  // Polls Status until the pool holds at least `ready` ready VMs (of all
  // shapes), none booting when `settled`.
  Result<pool::PoolStatus> WaitReady(uint32_t ready, std::chrono::milliseconds timeout, bool settled = false);
  Result<pool::PoolStatus> Status();
  pool::PoolClient& client() { return *client_; }
  // Waits for a line of the daemon's log.
  Result<std::string> WaitForLog(const std::string& needle, std::chrono::milliseconds timeout);
  std::string log() const { return cmd_ ? cmd_->output() : log_; }
  pid_t pid() const { return cmd_->pid(); }
  // SIGKILL: leaves its VMs as a crash would.
  void Kill();
  // SIGTERM (the daemon drains) and reap.
  void Stop();

 private:
  PoolDaemonProcess() = default;
  std::optional<StreamingCommand> cmd_;
  std::unique_ptr<pool::PoolClient> client_;
  std::string log_;  // once stopped or killed
};

}  // namespace capsule::testing
