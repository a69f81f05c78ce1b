// capsule-vsockd as a process: command line, readiness, exit when QEMU
// disconnects or on SIGTERM, and no socket or pid file left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unix_stream.h"
#include "tests/runtime/vsock/fake_driver.h"
#include "tests/runtime/vsock/test_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule::vsock::testing {
namespace {

std::string VsockdBinary() {
  const char* build = std::getenv("CAPSULE_BUILD_DIR");
  return std::string(build ? build : ".") + "/runtime/vsock/capsule-vsockd";
}

struct RunResult {
  int exit_code = -1;
  std::string output;
};

// Runs capsule-vsockd with `args` to completion, capturing its output.
RunResult RunToEnd(const std::vector<std::string>& args, const TempDir& dir) {
  std::string out_path = dir.Join("out.txt");
  UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  SpawnOptions so;
  so.argv = {VsockdBinary()};
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  so.stdout_fd = out.get();
  so.stderr_fd = out.get();
  auto child = ChildProcess::Spawn(so);
  if (!child.ok()) return {};
  auto st = child->Wait(std::chrono::seconds(10));
  return {st.ok() ? ExitCode(*st) : -1, ReadFile(out_path).value_or("")};
}

class VsockdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = TempDir::Create("vsockd");
    ASSERT_OK(d);
    dir_ = std::make_unique<TempDir>(std::move(*d));
  }

  // Starts a daemon serving this test's paths and waits for READY.
  ChildProcess StartDaemon() {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    UniqueFd r(p[0]), w(p[1]);
    log_ = UniqueFd(::open(dir_->Join("vsockd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    SpawnOptions so;
    so.argv = {VsockdBinary(), "--vhost-user-socket", vhost(), "--uds-path", uds(),   "--guest-cid",
               "5",            "--ready-fd",          std::to_string(w.get()),        "--pid-file", pidfile()};
    so.keep_fds = {w.get()};
    so.stdout_fd = so.stderr_fd = log_.get();
    auto child = ChildProcess::Spawn(so);
    EXPECT_OK(child);
    w.reset();
    EXPECT_OK(WaitFd(r.get(), POLLIN, kWait, "READY"));
    char buf[8] = {};
    EXPECT_EQ(::read(r.get(), buf, sizeof buf), 6);
    EXPECT_EQ(std::string(buf, 6), "READY\n");
    return std::move(*child);
  }

  std::string vhost() const { return dir_->Join("vhost-vsock.sock"); }
  std::string uds() const { return dir_->Join("vsock.sock"); }
  std::string pidfile() const { return dir_->Join("vsockd.pid"); }
  std::string Log() const { return ReadFile(dir_->Join("vsockd.log")).value_or(""); }

  void ExpectCleanExit(ChildProcess& c) {
    auto st = c.Wait(std::chrono::seconds(5));
    ASSERT_OK(st);
    EXPECT_EQ(ExitCode(*st), 0) << Log();
    EXPECT_FALSE(PathExists(vhost()));
    EXPECT_FALSE(PathExists(uds()));
    EXPECT_FALSE(PathExists(pidfile()));
  }

  std::unique_ptr<TempDir> dir_;
  UniqueFd log_;
};

TEST_F(VsockdTest, HelpAndVersion) {
  RunResult help = RunToEnd({"--help"}, *dir_);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--vhost-user-socket"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("--uds-path"), std::string::npos);
  RunResult version = RunToEnd({"--version"}, *dir_);
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("capsule-vsockd "), std::string::npos) << version.output;
}

TEST_F(VsockdTest, BadArgumentsFailWithAMessage) {
  RunResult missing = RunToEnd({"--uds-path", uds()}, *dir_);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("vhost-user-socket"), std::string::npos) << missing.output;
  RunResult cid = RunToEnd({"--vhost-user-socket", vhost(), "--uds-path", uds(), "--guest-cid", "2"}, *dir_);
  EXPECT_EQ(cid.exit_code, 1);
  EXPECT_NE(cid.output.find("guest cid 2"), std::string::npos) << cid.output;
  RunResult level = RunToEnd({"--vhost-user-socket", vhost(), "--uds-path", uds(), "--log-level", "loud"}, *dir_);
  EXPECT_NE(level.exit_code, 0);
  EXPECT_NE(level.output.find("loud"), std::string::npos) << level.output;
  EXPECT_FALSE(PathExists(vhost()));
}

TEST_F(VsockdTest, ExitsWhenQemuDisconnects) {
  ChildProcess d = StartDaemon();
  EXPECT_EQ(ReadFile(pidfile()).value_or(""), std::to_string(d.pid()) + "\n");
  {
    auto drv = FakeDriver::Connect(vhost());
    ASSERT_OK(drv);
    ASSERT_TRUE((*drv)->Realize().ok());
    auto cfg = (*drv)->GetConfig(0, 8);
    ASSERT_OK(cfg);
    EXPECT_EQ((*cfg)[0], 5);
  }
  ExpectCleanExit(d);
  std::string log = Log();
  EXPECT_NE(log.find("front end connected"), std::string::npos) << log;
  EXPECT_NE(log.find("config read"), std::string::npos) << log;
  EXPECT_NE(log.find("front end disconnected"), std::string::npos) << log;
}

TEST_F(VsockdTest, SigtermStopsItCleanly) {
  ChildProcess d = StartDaemon();
  auto host = ConnectUnix(uds());  // an idle host client must not block the exit
  ASSERT_OK(host);
  ASSERT_OK(d.Signal(SIGTERM));
  ExpectCleanExit(d);
  EXPECT_NE(Log().find("received signal 15"), std::string::npos) << Log();
}

TEST_F(VsockdTest, RefusesSocketsAnotherDaemonServes) {
  ChildProcess first = StartDaemon();
  RunResult second = RunToEnd({"--vhost-user-socket", vhost(), "--uds-path", uds()}, *dir_);
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.output.find("another process serves it"), std::string::npos) << second.output;
  EXPECT_TRUE(PathExists(vhost())) << "the first daemon's socket is untouched";
  // The second one's liveness probe did not count as QEMU leaving.
  EXPECT_FALSE(first.TryReap());
  auto drv = FakeDriver::Connect(vhost());
  ASSERT_OK(drv);
  EXPECT_TRUE((*drv)->Realize().ok());
  ASSERT_OK(first.Signal(SIGTERM));
  ExpectCleanExit(first);
}

TEST_F(VsockdTest, ReplacesAStaleSocketFile) {
  {
    auto stale = ListenUnix(uds());
    ASSERT_OK(stale);
  }  // closed: the file stays, nobody accepts
  ASSERT_TRUE(PathExists(uds()));
  ChildProcess d = StartDaemon();
  ASSERT_OK(d.Signal(SIGTERM));
  ExpectCleanExit(d);
}

}  // namespace
}  // namespace capsule::vsock::testing
