// capsule-vsockd behind the real QEMU 7.2 (TCG): QEMU must realize
// vhost-user-vsock-pci against it (features, protocol features, GET_CONFIG)
// and stop it on quit. With a guest kernel available, a real Linux guest's
// virtio-vsock driver carries data both ways through it.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/vsock/unix_socket.h"
#include "runtime/vsock/vsockd_vsock.h"
#include "tests/runtime/vsock/qemu_harness.h"
#include "tests/runtime/vsock/test_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock::testing {
namespace {

bool Exists(const std::string& p) {
  struct stat st{};
  return ::lstat(p.c_str(), &st) == 0;
}

// Waits for a process we did not necessarily spawn to exit.
bool WaitPidExit(pid_t pid, std::chrono::milliseconds timeout) {
  auto fd = OpenPidfd(pid);
  if (!fd.ok()) return true;  // already gone
  return WaitFd(fd->get(), POLLIN, timeout, "process exit").ok();
}

class VsockQemuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/qemu-system-x86_64", X_OK) != 0) GTEST_SKIP() << "qemu-system-x86_64 not installed";
    auto d = TempDir::Create("vsock-qemu");
    ASSERT_OK(d);
    dir_ = std::make_unique<TempDir>(std::move(*d));
    VsockBackendOptions o;
    auto vm = VsockdVsock(o).Prepare({dir_->path(), 0, "vsock0"});
    ASSERT_OK(vm);
    vsock_ = std::move(*vm);
  }

  // QMP quit; QEMU exits 0, then capsule-vsockd follows and removes its files.
  void QuitAndExpectCleanStop(Qmp& qmp, QemuVmm& qemu) {
    pid_t vsockd = static_cast<VsockdVmVsock*>(vsock_.get())->vsockd_pid();
    (void)qmp.Execute("quit");
    auto st = qemu.process.Wait(std::chrono::seconds(20));
    ASSERT_OK(st);
    EXPECT_EQ(ExitCode(*st), 0) << ReadFile(qemu.log).value_or("");
    EXPECT_TRUE(WaitPidExit(vsockd, std::chrono::seconds(5))) << "capsule-vsockd outlived QEMU";
    EXPECT_FALSE(Exists(dir_->Join(kVhostUserSocketName)));
    EXPECT_FALSE(Exists(dir_->Join(kHybridSocketName)));
    EXPECT_FALSE(Exists(dir_->Join(kVsockdPidName)));
    std::string log = ReadFile(dir_->Join(kVsockdLogName)).value_or("");
    EXPECT_NE(log.find("front end disconnected"), std::string::npos) << log;
    EXPECT_OK(vsock_->Shutdown(std::chrono::seconds(1)));
  }

  std::unique_ptr<TempDir> dir_;
  VmVsockPtr vsock_;
};

TEST_F(VsockQemuTest, QemuRealizesTheDeviceAgainstTheDaemon) {
  auto qemu = StartQemu(*dir_, *vsock_, {"-S"});
  ASSERT_OK(qemu);
  auto qmp = Qmp::Connect(dir_->Join("qmp.sock"), qemu->process, std::chrono::seconds(20));
  ASSERT_OK(qmp) << "\n" << ReadFile(qemu->log).value_or("");
  auto pci = qmp->Execute("query-pci");
  ASSERT_OK(pci);
  bool found = false;
  for (const auto& bus : *pci)
    for (const auto& dev : bus["devices"])
      if (dev["id"]["vendor"] == 0x1af4 && dev["id"]["device"] == 0x1053 && dev.value("qdev_id", "") == "vsock0")
        found = true;
  EXPECT_TRUE(found) << "virtio-vsock (1af4:1053) missing from " << pci->dump();
  std::string log = ReadFile(dir_->Join(kVsockdLogName)).value_or("");
  EXPECT_NE(log.find("protocol features acked: 0x209"), std::string::npos) << log;
  EXPECT_NE(log.find("config read: offset 0 size 8"), std::string::npos) << log;
  // The guest never ran (-S): a dial fails fast instead of hanging.
  auto dial = vsock_->Dial(kAgentPort, std::chrono::seconds(5));
  EXPECT_EQ(dial.status().code(), Code::kUnavailable) << dial.status().ToString();
  QuitAndExpectCleanStop(*qmp, *qemu);
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 2463534242u;
  for (char& c : s) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    c = static_cast<char>(x);
  }
  return s;
}

// Sends `data` and reads the echo back on one stream; returns the echo.
std::string EchoThrough(int fd, const std::string& data) {
  std::thread writer([&] {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd, data.data() + off, std::min<size_t>(65536, data.size() - off), MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  });
  std::string echo = ReadN(fd, data.size(), std::chrono::seconds(60));
  writer.join();
  return echo;
}

TEST_F(VsockQemuTest, LinuxGuestTalksThroughTheDaemon) {
  std::optional<GuestKernel> kernel = FindGuestKernel();
  if (!kernel)
    GTEST_SKIP() << "no guest kernel: set CAPSULE_TEST_GUEST_KERNEL_DIR to a dpkg -x of linux-image-amd64 "
                    "(or run deploy's fetch-guest-kernel.sh)";
  auto initrd = BuildEchoInitrd(*dir_, *kernel, CAPSULE_VSOCK_ECHO_GUEST);
  ASSERT_OK(initrd);
  auto greet_listener = ListenUnix(vsock_->HostListenPath(5000));
  ASSERT_OK(greet_listener);
  auto qemu = StartQemu(*dir_, *vsock_,
                        {"-cpu", "max", "-kernel", kernel->vmlinuz, "-initrd", *initrd, "-append",
                         "console=ttyS0 panic=-1 quiet", "-serial", "file:" + dir_->Join("console.log"), "-no-reboot"});
  ASSERT_OK(qemu);
  auto qmp = Qmp::Connect(dir_->Join("qmp.sock"), qemu->process, std::chrono::seconds(20));
  ASSERT_OK(qmp);

  // Boot (TCG: ~10 s idle, minutes on a loaded host): retry until the
  // guest's listener answers. A refused dial returns at once, so the retry
  // needs its own pause.
  auto boot_start = std::chrono::steady_clock::now();
  Result<UniqueFd> conn = Unavailable("not tried");
  while (std::chrono::steady_clock::now() - boot_start < std::chrono::seconds(240)) {
    conn = vsock_->Dial(kAgentPort, std::chrono::seconds(5));
    if (conn.ok() || qemu->process.TryReap()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_OK(conn) << "\nconsole:\n"
                         << ReadFile(dir_->Join("console.log")).value_or("") << "\nvsockd:\n"
                         << ReadFile(dir_->Join(kVsockdLogName)).value_or("");
  std::printf("[ info ] guest echo reachable %.1f s after QEMU start\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - boot_start).count());

  // One stream, 4 MiB each way.
  std::string big = Pattern(4 << 20);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(EchoThrough(conn->get(), big) == big) << "echo differs";
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] echo of %zu bytes through a TCG guest: %.2f s (%.1f MiB/s each way)\n", big.size(), secs,
              big.size() / secs / (1 << 20));
  // Half-close: the guest sees EOF, closes, and we see EOF.
  ASSERT_EQ(::shutdown(conn->get(), SHUT_WR), 0);
  EXPECT_TRUE(WaitEof(conn->get(), std::chrono::seconds(30)));

  // Several streams at once.
  std::vector<std::thread> streams;
  std::atomic<int> good{0};
  for (int i = 0; i < 4; ++i) {
    streams.emplace_back([&, i] {
      auto fd = vsock_->Dial(kAgentPort, std::chrono::seconds(10));
      if (!fd.ok()) return;
      std::string data = Pattern(256 * 1024 + i);
      if (EchoThrough(fd->get(), data) == data) ++good;
    });
  }
  for (auto& t : streams) t.join();
  EXPECT_EQ(good.load(), 4);

  // Nothing listens on guest port 4444: the guest resets, the dial fails.
  auto refused = vsock_->Dial(4444, std::chrono::seconds(10));
  EXPECT_EQ(refused.status().code(), Code::kUnavailable) << refused.status().ToString();

  // The guest's own connection to host port 5000 lands on <uds>_5000.
  ASSERT_OK(WaitFd(greet_listener->get(), POLLIN, std::chrono::seconds(60), "guest connect"))
      << ReadFile(dir_->Join("console.log")).value_or("");
  UniqueFd greet(::accept4(greet_listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(greet);
  EXPECT_EQ(ReadLine(greet.get()), "hello from the guest\n");
  EXPECT_TRUE(WaitEof(greet.get()));
  greet.reset();

  QuitAndExpectCleanStop(*qmp, *qemu);
}

}  // namespace
}  // namespace capsule::vsock::testing
