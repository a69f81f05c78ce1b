// main() of engine_test. On a host it is gtest's usual main. As PID 1 of a
// guest (engine_vm_test boots it as /init of an initramfs) it first mounts
// what the agent's PID-1 side would (proc, sysfs, devtmpfs, a tmpfs /tmp,
// cgroup2 on /sys/fs/cgroup), runs the tests, prints a result line for the
// host and powers the VM off. In the guest a watchdog turns a test that hangs
// into a task dump and a failed result instead of a VM the host must kill.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;

// No engine test takes more than a few seconds under TCG; one that runs this
// long is stuck, and waiting longer only delays its diagnosis.
// --capsule_watchdog_seconds=N changes it (0 fires at the first check, to
// see a dump).
std::chrono::seconds g_stuck_after{90};

void MountOrWarn(const char* source, const char* target, const char* type) {
  ::mkdir(target, 0755);
  if (::mount(source, target, type, 0, nullptr) != 0) std::perror(target);
}

void PrepareGuest() {
  MountOrWarn("devtmpfs", "/dev", "devtmpfs");
  int console = ::open("/dev/console", O_RDWR);
  if (console >= 0) {
    for (int fd = 0; fd < 3; ++fd) ::dup2(console, fd);
    if (console > 2) ::close(console);
  }
  MountOrWarn("proc", "/proc", "proc");
  MountOrWarn("sysfs", "/sys", "sysfs");
  MountOrWarn("cgroup2", "/sys/fs/cgroup", "cgroup2");
  MountOrWarn("tmpfs", "/tmp", "tmpfs");
  ::setenv("PATH", "/bin", 1);
  ::setenv("TMPDIR", "/tmp", 1);
  std::printf("engine_test: running as PID 1 of a guest\n");
}

// A /proc file's text without its trailing newline or NUL; "" if unreadable.
std::string ReadSmall(const std::string& path) {
  std::string text = capsule::ReadFile(path).value_or("");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

std::vector<std::string> Numeric(const std::string& dir) {
  std::vector<std::string> out;
  for (std::string& n : capsule::ListDir(dir))
    if (n[0] >= '0' && n[0] <= '9') out.push_back(std::move(n));
  return out;
}

// The watchdog reports through /dev/kmsg, never stdio: a test stuck inside
// printf holds stdout's lock, and a stalled console tty blocks every
// write(2) to it, while the kernel's console output is polled and gets
// through. engine_vm_test boots with printk.devkmsg=on (no rate limit).
class KmsgReport {
 public:
  KmsgReport() : fd_(::open("/dev/kmsg", O_WRONLY | O_CLOEXEC)) {}
  // One record per line, at KERN_CRIT so that `quiet` does not hide it.
  void Line(const std::string& text) {
    std::string rec = "<2>engine_test watchdog: " + text.substr(0, 900);
    if (fd_) (void)!::write(fd_.get(), rec.data(), rec.size());
  }
  void Lines(const std::string& prefix, const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) Line(prefix + line);
  }

 private:
  capsule::UniqueFd fd_;
};

// The state letter of a /proc/<pid>/stat line ("R", "S", "D"...).
std::string TaskState(const std::string& stat) {
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? "?" : stat.substr(paren + 2, 1);
}

// Every task's state, wait channel, current syscall and kernel stack, then
// the kernel's own dump of blocked tasks (sysrq w works whatever the sysrq
// sysctl says).
void DumpTasks(KmsgReport& out) {
  for (const std::string& pid : Numeric("/proc")) {
    const std::string p = "/proc/" + pid;
    out.Line("pid " + pid + " cmdline [" + ReadSmall(p + "/cmdline") + "]");
    for (const std::string& tid : Numeric(p + "/task")) {
      const std::string t = p + "/task/" + tid;
      out.Line("  tid " + tid + " comm " + ReadSmall(t + "/comm") + " state " + TaskState(ReadSmall(t + "/stat")) +
               " wchan " + ReadSmall(t + "/wchan") + " syscall " + ReadSmall(t + "/syscall"));
      out.Lines("    ", ReadSmall(t + "/stack"));
    }
  }
  int sysrq = ::open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC);
  if (sysrq >= 0) {
    (void)!::write(sysrq, "w", 1);
    ::close(sysrq);
  }
}

class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> l(mu_);
    name_ = std::string(info.test_suite_name()) + "." + info.name();
    started_ = Clock::now();
    running_ = true;
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> l(mu_);
    running_ = false;
  }

  // Runs for the life of PID 1; never returns once it has fired.
  void Watch() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      std::string stuck;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (running_ && Clock::now() - started_ >= g_stuck_after) stuck = name_;
      }
      if (stuck.empty()) continue;
      KmsgReport out;
      out.Line(stuck + " has run for over " + std::to_string(g_stuck_after.count()) + " s; dumping tasks");
      DumpTasks(out);
      out.Line("CAPSULE_VM_RESULT=124 (" + stuck + " hung)");
      ::sync();
      ::reboot(RB_POWER_OFF);
    }
  }

 private:
  std::mutex mu_;
  std::string name_;
  Clock::time_point started_;
  bool running_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  const bool guest = ::getpid() == 1;
  if (guest) PrepareGuest();
  ::testing::InitGoogleTest(&argc, argv);
  const std::string flag = "--capsule_watchdog_seconds=";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind(flag, 0) == 0) g_stuck_after = std::chrono::seconds(std::atoi(argv[i] + flag.size()));
  }
  if (guest) {
    auto owned = std::make_unique<Watchdog>();
    Watchdog* watchdog = owned.get();
    ::testing::UnitTest::GetInstance()->listeners().Append(owned.release());  // gtest owns it now
    std::thread([watchdog] { watchdog->Watch(); }).detach();
  }
  int rc = RUN_ALL_TESTS();
  if (guest) {
    std::printf("CAPSULE_VM_RESULT=%d\n", rc);
    std::fflush(stdout);
    ::sync();
    ::reboot(RB_POWER_OFF);
  }
  // The process-wide Reaper's thread runs until the process ends, and its
  // singleton is a function-local static: exit()'s static destructors would
  // free it under the running thread. End like the agent would, without them.
#if defined(__SANITIZE_ADDRESS__)
  __lsan_do_leak_check();
#endif
  std::fflush(nullptr);
  ::_exit(rc);
}
