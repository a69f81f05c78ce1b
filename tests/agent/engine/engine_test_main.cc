// main() of engine_test. On a host it is gtest's usual main. As PID 1 of a
// guest (engine_vm_test boots it as /init of an initramfs) it first mounts
// what the agent's PID-1 side would (proc, sysfs, devtmpfs, a tmpfs /tmp,
// cgroup2 on /sys/fs/cgroup), runs the tests, prints a result line for the
// host and powers the VM off.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace {

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

}  // namespace

int main(int argc, char** argv) {
  const bool guest = ::getpid() == 1;
  if (guest) PrepareGuest();
  ::testing::InitGoogleTest(&argc, argv);
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
