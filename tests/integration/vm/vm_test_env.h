// Helpers for tests that boot real VMs: a temp root with a generated
// config.yaml (the built guest image from $CAPSULE_BUILD_DIR/deploy, a state
// dir inside the root), leak checks (processes, mounts, memfds), and a tap
// on the log so a test can act when a line appears (event, not sleep).
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "runtime/config/config.h"

namespace capsule::vm::testing {

std::string BuildDir();
std::string GuestKernel();  // <build>/deploy/vmlinuz
std::string GuestInitrd();  // <build>/deploy/capsule-initrd.img

// YAML keys to override in the generated config, as "section.key: value".
struct TestConfigOverrides {
  std::string kernel;  // "" = GuestKernel()
  std::string initrd;
  std::string qemu;    // "" = the default
  uint32_t boot_timeout_ms = 120000;
  std::string device_set;  // "" = the default (virtio-fs)
};

// A temp root holding config.yaml and state/ (runtime.state_dir).
class TestEnv {
 public:
  static Result<std::unique_ptr<TestEnv>> Create(const TestConfigOverrides& o = {});
  const std::string& root() const { return root_.path(); }
  std::string config_path() const { return root_.Join("config.yaml"); }
  std::string state_dir() const { return root_.Join("state"); }
  const config::Config& config() const { return config_; }

  // Whatever is left of VMs under root(): children of this process (zombies
  // too), processes mentioning root(), mounts under it, entries in state/vm
  // (sockets, pid files, the share). Empty when everything was cleaned up.
  std::vector<std::string> Leftovers() const;
  // Entries of state_dir()/vm (one per VM dir left there).
  std::vector<std::string> VmDirs() const;

 private:
  explicit TestEnv(TempDir root) : root_(std::move(root)) {}
  TempDir root_;
  config::Config config_;
};

// memfd mappings or descriptors this process holds ("" when none), once
// the fds queued for the background closer are closed.
std::string MemfdsHeldByUs();

// Children of this process in any state ("child process PID (comm) in state S").
std::vector<std::string> ChildrenOfUs();

// Pids of live processes whose command line mentions `needle`.
std::vector<pid_t> ProcessesMentioning(const std::string& needle);

// Redirects capsule's log into a pipe for the tap's lifetime, copying every
// line to stderr; WaitFor blocks until a line containing `needle` arrived.
class LogTap {
 public:
  LogTap();
  ~LogTap();
  LogTap(const LogTap&) = delete;
  LogTap& operator=(const LogTap&) = delete;
  bool WaitFor(const std::string& needle, std::chrono::milliseconds timeout);

 private:
  void Pump();
  UniqueFd read_, write_;
  int old_fd_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string seen_;  // guarded by mu_
};

}  // namespace capsule::vm::testing
