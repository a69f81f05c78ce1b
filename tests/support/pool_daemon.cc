// See pool_daemon.h.
#include "tests/support/pool_daemon.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace capsule::testing {
namespace {

constexpr std::chrono::milliseconds kCallTimeout{3000};
constexpr std::chrono::milliseconds kPoll{100};
// A drain waits for a boot in flight (TCG: ~10 s).
constexpr std::chrono::milliseconds kStopGrace{90000};

std::string CapsuleRuntime() {
  const char* b = std::getenv("CAPSULE_BUILD_DIR");
  return std::string(b != nullptr ? b : ".") + "/runtime/cli/capsule-runtime";
}

}  // namespace

Result<std::unique_ptr<PoolDaemonProcess>> PoolDaemonProcess::Start(const std::string& config_path,
                                                                   const std::string& socket_path) {
  return StartProgram({CapsuleRuntime(), "--config", config_path, "pool", "serve"}, "", socket_path);
}

Result<std::unique_ptr<PoolDaemonProcess>> PoolDaemonProcess::StartProgram(std::vector<std::string> argv,
                                                                          const std::string& config_path,
                                                                          const std::string& socket_path) {
  if (!config_path.empty()) argv.insert(argv.end(), {"--config", config_path});
  std::unique_ptr<PoolDaemonProcess> d(new PoolDaemonProcess());
  ASSIGN_OR_RETURN(StreamingCommand cmd, StreamingCommand::Start(argv));
  d->cmd_.emplace(std::move(cmd));
  d->client_ = pool::PoolClient::Create(socket_path);
  RETURN_IF_ERROR(d->WaitForLog("capsule-poold serving", std::chrono::seconds(30)).status());
  return d;
}

PoolDaemonProcess::~PoolDaemonProcess() { Stop(); }

Result<pool::PoolStatus> PoolDaemonProcess::Status() {
  return client_->GetStatus(kCallTimeout);
}

Result<pool::PoolStatus> PoolDaemonProcess::WaitReady(uint32_t ready, std::chrono::milliseconds timeout,
                                                      bool settled) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Result<pool::PoolStatus> st = Unavailable("not asked yet");
  for (;;) {
    st = Status();
    if (st.ok()) {
      uint32_t r = 0, b = 0;
      for (const auto& s : st->shapes) {
        r += s.ready;
        b += s.booting;
      }
      if (r >= ready && (!settled || b == 0)) return st;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return DeadlineExceeded("the pool did not get " + std::to_string(ready) + " ready VM(s) in time (" +
                              (st.ok() ? "status ok" : st.status().ToString()) + "); its log:\n" + log());
    }
    std::this_thread::sleep_for(kPoll);
  }
}

Result<std::string> PoolDaemonProcess::WaitForLog(const std::string& needle, std::chrono::milliseconds timeout) {
  return cmd_->WaitForOutput(needle, timeout);
}

void PoolDaemonProcess::Kill() {
  if (!cmd_) return;
  ::kill(cmd_->pid(), SIGKILL);
  cmd_->Stop(std::chrono::milliseconds(0));
  log_ = cmd_->output();
  cmd_.reset();
}

void PoolDaemonProcess::Stop() {
  if (!cmd_) return;
  cmd_->Stop(kStopGrace);
  log_ = cmd_->output();
  cmd_.reset();
}

}  // namespace capsule::testing
