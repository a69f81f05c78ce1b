// VsockBackend: selection between the kernel and the vhost-user back end,
// and the vhost-user VmVsock lifecycle with the real capsule-vsockd (QEMU's
// side played by FakeDriver): prepare, dial, detach, adopt, shut down.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"
#include "runtime/host/proc_stat.h"
#include "runtime/vsock/kernel_vhost_vsock.h"
#include "runtime/vsock/vsockd_vsock.h"
#include "runtime/vsock/vsock_backend.h"
#include "runtime/vsock/vsock_state.h"
#include "tests/runtime/vsock/fake_driver.h"
#include "tests/runtime/vsock/test_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock::testing {
namespace {

using config::VsockBackendKind;

// capsule-vsockd is double-forked, so not our child: whoever reaps orphans
// here reaps it, and until then a zombie counts as gone.
bool Alive(pid_t pid) { return !ProcessExiting(pid); }

class VsockBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = TempDir::Create("vsock-vm");
    ASSERT_OK(d);
    dir_ = std::make_unique<TempDir>(std::move(*d));
    options_.vhost_vsock_device = dir_->Join("no-vhost-vsock");
  }

  std::unique_ptr<TempDir> dir_;
  VsockBackendOptions options_;
};

TEST_F(VsockBackendTest, AutoResolvesByKernelDevice) {
  EXPECT_EQ(ResolveVsockBackendKind(VsockBackendKind::kAuto, false), VsockBackendKind::kVhostUser);
  EXPECT_EQ(ResolveVsockBackendKind(VsockBackendKind::kAuto, true), VsockBackendKind::kVhost);
  EXPECT_EQ(ResolveVsockBackendKind(VsockBackendKind::kVhostUser, true), VsockBackendKind::kVhostUser);
  EXPECT_EQ(ResolveVsockBackendKind(VsockBackendKind::kVhost, false), VsockBackendKind::kVhost);
}

TEST_F(VsockBackendTest, AutoPicksVhostUserWithoutTheKernelDevice) {
  auto b = MakeVsockBackend(VsockBackendKind::kAuto, options_);
  ASSERT_OK(b);
  EXPECT_EQ((*b)->kind(), VsockBackendKind::kVhostUser);
  if (::access("/dev/vhost-vsock", F_OK) != 0) {
    auto host = MakeVsockBackend(VsockBackendKind::kAuto);
    ASSERT_OK(host);
    EXPECT_EQ((*host)->kind(), VsockBackendKind::kVhostUser) << "this host has no /dev/vhost-vsock";
  }
}

TEST_F(VsockBackendTest, ForcingVhostWithoutTheKernelDeviceFails) {
  auto b = MakeVsockBackend(VsockBackendKind::kVhost, options_);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(b.status().message().find(options_.vhost_vsock_device), std::string::npos) << b.status().message();
  EXPECT_NE(b.status().message().find("vhost-user"), std::string::npos) << "says what to use instead";
  if (::access("/dev/vhost-vsock", F_OK) != 0) {
    auto host = MakeVsockBackend(VsockBackendKind::kVhost);
    ASSERT_FALSE(host.ok());
    EXPECT_NE(host.status().message().find("/dev/vhost-vsock"), std::string::npos);
  }
}

TEST_F(VsockBackendTest, KernelBackendReportsTheFailingIoctl) {
  // A device node that opens but is not vhost-vsock: auto picks the kernel
  // backend, and reserving a CID fails naming the ioctl and the device.
  options_.vhost_vsock_device = dir_->Join("fake-vhost-vsock");
  ASSERT_OK(WriteFile(options_.vhost_vsock_device, ""));
  auto b = MakeVsockBackend(VsockBackendKind::kAuto, options_);
  ASSERT_OK(b);
  EXPECT_EQ((*b)->kind(), VsockBackendKind::kVhost);
  auto vm = (*b)->Prepare({dir_->path(), 0, "vsock0"});
  ASSERT_FALSE(vm.ok());
  EXPECT_NE(vm.status().message().find("VHOST_VSOCK_SET_GUEST_CID 3 on " + options_.vhost_vsock_device),
            std::string::npos)
      << vm.status().message();
  EXPECT_FALSE(PathExists(dir_->Join(kStateFile)));
}

TEST_F(VsockBackendTest, KernelDialFailsCleanlyWithoutVsock) {
  auto fd = DialVsock(3, 1024, std::chrono::milliseconds(200));
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("vsock 3:1024"), std::string::npos) << fd.status().message();
}

TEST_F(VsockBackendTest, KernelStateIsAdoptable) {
  VsockState s;
  s.backend = VsockBackendKind::kVhost;
  s.guest_cid = 42;
  s.device_id = "vsock0";
  ASSERT_OK(WriteVsockState(dir_->path(), s));
  auto vm = AdoptVmVsock(dir_->path(), options_);
  ASSERT_OK(vm);
  EXPECT_EQ((*vm)->kind(), VsockBackendKind::kVhost);
  EXPECT_EQ((*vm)->guest_cid(), 42u);
  EXPECT_EQ((*vm)->qemu_device().Args(),
            (std::vector<std::string>{"-device", "vhost-vsock-pci,id=vsock0,guest-cid=42"}));
  EXPECT_EQ((*vm)->HostListenPath(5000), "");
}

TEST_F(VsockBackendTest, BrokenStateFilesNameTheProblem) {
  ASSERT_OK(WriteFile(dir_->Join(kStateFile), "{\"backend\":\"vhost-user\",\"guest_cid\":3}"));
  auto r = ReadVsockState(dir_->path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device_id"), std::string::npos) << r.status().message();
  ASSERT_OK(WriteFile(dir_->Join(kStateFile), "not json"));
  EXPECT_FALSE(ReadVsockState(dir_->path()).ok());
  EXPECT_FALSE(AdoptVmVsock(dir_->Join("nowhere"), options_).ok());
}

TEST_F(VsockBackendTest, VhostUserPrepareRejectsBadSpecs) {
  VsockdVsock b(options_);
  EXPECT_FALSE(b.Prepare({dir_->Join("missing"), 0, "vsock0"}).ok());
  EXPECT_FALSE(b.Prepare({dir_->path(), 2, "vsock0"}).ok()) << "cid 2 is the host";
  EXPECT_FALSE(b.Prepare({dir_->path(), 0, "9bad"}).ok());
  EXPECT_FALSE(b.Prepare({dir_->path(), 0, "a,b"}).ok());
  std::string deep = dir_->Join(std::string(100, 'd'));
  ASSERT_OK(MkdirAll(deep));
  auto r = b.Prepare({deep, 0, "vsock0"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too long"), std::string::npos) << r.status().message();
}

TEST_F(VsockBackendTest, VhostUserPrepareStartsTheDaemonAndShutdownCleansUp) {
  VsockdVsock b(options_);
  auto vm = b.Prepare({dir_->path(), 0, "vsock0"});
  ASSERT_OK(vm);
  auto* v = static_cast<VsockdVmVsock*>(vm->get());
  EXPECT_EQ(v->guest_cid(), 3u);
  EXPECT_TRUE(PathExists(dir_->Join(kVhostUserSocketName)));
  EXPECT_TRUE(PathExists(dir_->Join(kHybridSocketName)));
  EXPECT_TRUE(PathExists(dir_->Join(kVsockdPidName)));
  EXPECT_EQ(v->qemu_device().Args(),
            (std::vector<std::string>{"-chardev", "socket,id=vsock0-chr,path=" + dir_->Join(kVhostUserSocketName),
                                      "-device", "vhost-user-vsock-pci,id=vsock0,chardev=vsock0-chr"}));
  EXPECT_TRUE(v->qemu_device().needs_shared_memory);
  EXPECT_EQ(v->HostListenPath(5000), dir_->Join("vsock.sock_5000"));
  auto state = ReadVsockState(dir_->path());
  ASSERT_OK(state);
  EXPECT_EQ(state->vsockd_pid, v->vsockd_pid());
  pid_t pid = v->vsockd_pid();
  EXPECT_TRUE(Alive(pid));
  // No guest driver yet: a dial fails fast, without hanging.
  auto early = v->Dial(kAgentPort, std::chrono::seconds(5));
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), Code::kUnavailable) << early.status().ToString();
  EXPECT_OK(v->Shutdown(std::chrono::seconds(2)));
  EXPECT_FALSE(Alive(pid));
  for (const char* f : {kVhostUserSocketName, kHybridSocketName, kVsockdPidName, kStateFile})
    EXPECT_FALSE(PathExists(dir_->Join(f))) << f;
  std::string log = ReadFile(dir_->Join(kVsockdLogName)).value_or("");
  EXPECT_NE(log.find("stopped; sockets removed"), std::string::npos) << log;
}

// The serial back end: the same daemon on a virtio-serial port's socket,
// QEMU's port device named for the agent, no shared RAM, and one CID for
// every VM (the link is point to point). Adoption goes by vsock.json.
TEST_F(VsockBackendTest, SerialPrepareStartsTheDaemonOnThePortSocketAndIsAdoptable) {
  auto b = MakeVsockBackend(VsockBackendKind::kSerial, options_);
  ASSERT_OK(b);
  EXPECT_EQ((*b)->kind(), VsockBackendKind::kSerial);
  auto vm = (*b)->Prepare({dir_->path(), 42, "vsock0"});
  ASSERT_OK(vm);
  auto* v = static_cast<VsockdVmVsock*>(vm->get());
  EXPECT_EQ(v->guest_cid(), 3u) << "a serial link's CID names nothing: always 3";
  EXPECT_TRUE(PathExists(dir_->Join(kSerialSocketName)));
  EXPECT_FALSE(PathExists(dir_->Join(kVhostUserSocketName)));
  EXPECT_EQ(v->qemu_device().Args(),
            (std::vector<std::string>{"-chardev", "socket,id=vsock0-chr,path=" + dir_->Join(kSerialSocketName),
                                      "-device", "virtio-serial-pci,id=vsock0-bus", "-device",
                                      "virtserialport,id=vsock0,bus=vsock0-bus.0,chardev=vsock0-chr,name=capsule.vsock"}));
  EXPECT_FALSE(v->qemu_device().needs_shared_memory);
  auto cmdline = ReadFile("/proc/" + std::to_string(v->vsockd_pid()) + "/cmdline");
  ASSERT_OK(cmdline);
  EXPECT_NE(cmdline->find("--serial-socket"), std::string::npos);
  // No VM port attached yet: a dial fails fast.
  auto early = v->Dial(kAgentPort, std::chrono::seconds(5));
  EXPECT_EQ(early.status().code(), Code::kUnavailable) << early.status().ToString();

  (*vm)->Detach();
  pid_t pid = v->vsockd_pid();
  vm->reset();
  auto adopted = AdoptVmVsock(dir_->path(), options_);
  ASSERT_OK(adopted);
  EXPECT_EQ((*adopted)->kind(), VsockBackendKind::kSerial);
  EXPECT_TRUE((*adopted)->Shutdown(std::chrono::seconds(2)).ok());
  EXPECT_FALSE(Alive(pid));
  for (const char* f : {kSerialSocketName, kHybridSocketName, kVsockdPidName, kStateFile})
    EXPECT_FALSE(PathExists(dir_->Join(f))) << f;
}

TEST_F(VsockBackendTest, DialReachesTheGuestThroughTheDaemon) {
  VsockdVsock b(options_);
  auto vm = b.Prepare({dir_->path(), 7, "vsock0"});
  ASSERT_OK(vm);
  auto drv = FakeDriver::Connect(dir_->Join(kVhostUserSocketName));
  ASSERT_OK(drv);
  FakeDriver& d = **drv;
  ASSERT_OK(d.Realize());
  ASSERT_OK(d.Start());
  // The guest: accept port 1024 and answer "ping" with "pong".
  std::thread guest([&] {
    auto req = d.Receive();
    ASSERT_OK(req);
    ASSERT_EQ(req->hdr.operation(), Op::kRequest);
    EXPECT_EQ(req->hdr.dst_cid, 7u);
    ASSERT_OK(d.SendPacket(GuestPacket(7, Op::kResponse, 1024, req->hdr.src_port)));
    auto ping = d.Receive();
    ASSERT_OK(ping);
    EXPECT_EQ(ping->payload, "ping");
    ASSERT_OK(d.SendPacket(GuestPacket(7, Op::kRw, 1024, req->hdr.src_port), "pong"));
  });
  auto fd = (*vm)->Dial(kAgentPort, std::chrono::seconds(5));
  ASSERT_OK(fd);
  ASSERT_EQ(::write(fd->get(), "ping", 4), 4);
  EXPECT_EQ(ReadN(fd->get(), 4), "pong");
  guest.join();
  EXPECT_TRUE((*vm)->Shutdown(std::chrono::seconds(2)).ok());
  EXPECT_TRUE(d.WaitPeerClosed()) << "the daemon is gone";
}

TEST_F(VsockBackendTest, DetachedDaemonIsAdoptedAndStoppedByAnotherOwner) {
  pid_t pid;
  {
    VsockdVsock b(options_);
    auto vm = b.Prepare({dir_->path(), 0, "vsock0"});
    ASSERT_OK(vm);
    pid = static_cast<VsockdVmVsock*>(vm->get())->vsockd_pid();
    (*vm)->Detach();
  }
  EXPECT_TRUE(Alive(pid)) << "detaching leaves it running";
  auto adopted = AdoptVmVsock(dir_->path(), options_);
  ASSERT_OK(adopted);
  EXPECT_EQ((*adopted)->kind(), VsockBackendKind::kVhostUser);
  EXPECT_EQ((*adopted)->guest_cid(), 3u);
  auto dial = (*adopted)->Dial(kAgentPort, std::chrono::seconds(2));
  EXPECT_EQ(dial.status().code(), Code::kUnavailable) << "served (no guest yet): " << dial.status().ToString();
  EXPECT_TRUE((*adopted)->Shutdown(std::chrono::seconds(2)).ok());
  EXPECT_FALSE(Alive(pid));
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1) << "it is not our child, so never our zombie";
  std::string log = ReadFile(dir_->Join(kVsockdLogName)).value_or("");
  EXPECT_NE(log.find("stopped; sockets removed"), std::string::npos) << "a clean exit on SIGTERM: " << log;
  EXPECT_FALSE(PathExists(dir_->Join(kHybridSocketName)));
  EXPECT_FALSE(PathExists(dir_->Join(kStateFile)));
}

TEST_F(VsockBackendTest, AdoptRefusesADeadDaemon) {
  pid_t pid;
  {
    VsockdVsock b(options_);
    auto vm = b.Prepare({dir_->path(), 0, "vsock0"});
    ASSERT_OK(vm);
    pid = static_cast<VsockdVmVsock*>(vm->get())->vsockd_pid();
    (*vm)->Detach();
  }
  auto pidfd = OpenPidfd(pid);
  ASSERT_OK(pidfd);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  pollfd exited{pidfd->get(), POLLIN, 0};
  ASSERT_EQ(::poll(&exited, 1, 10000), 1);
  auto adopted = AdoptVmVsock(dir_->path(), options_);
  ASSERT_FALSE(adopted.ok());
  EXPECT_NE(adopted.status().message().find(std::to_string(pid)), std::string::npos) << adopted.status().message();
}

TEST_F(VsockBackendTest, DestroyingTheOwnerStopsTheDaemon) {
  pid_t pid;
  {
    VsockdVsock b(options_);
    auto vm = b.Prepare({dir_->path(), 0, "vsock0"});
    ASSERT_OK(vm);
    pid = static_cast<VsockdVmVsock*>(vm->get())->vsockd_pid();
  }
  EXPECT_FALSE(Alive(pid));
  EXPECT_FALSE(PathExists(dir_->Join(kVhostUserSocketName)));
  EXPECT_FALSE(PathExists(dir_->Join(kStateFile)));
}

TEST_F(VsockBackendTest, MissingDaemonBinaryIsReportedUpFront) {
  options_.vsockd_path = dir_->Join("no-such-vsockd");
  auto b = MakeVsockBackend(VsockBackendKind::kVhostUser, options_);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("no-such-vsockd"), std::string::npos) << b.status().message();
}

}  // namespace
}  // namespace capsule::vsock::testing
