// capsule.agent.v1.Agent over a unix socket, served by the real capsule-agent
// running as a normal process (--no-init) in its own mount and UTS
// namespaces: sandbox mounts and hostnames are real but never reach the host.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "runtime/common/version.h"
#include "runtime/wire/guest_abi.h"
#include "tests/agent/server/agent_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::testing {
namespace {

using google::protobuf::Empty;

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = AgentUnderTest::Start();
    ASSERT_OK(a);
    agent_ = std::move(a).value();
  }
  void TearDown() override {
    if (!agent_ || agent_->process().reaped()) return;
    // Every test leaves the agent alive and stoppable: it never died from a
    // request, and it exits 0 on SIGTERM after tearing down.
    auto code = agent_->Stop();
    ASSERT_OK(code);
    EXPECT_EQ(*code, 0);
    EXPECT_NE(::access(agent_->socket_path().c_str(), F_OK), 0) << "socket left behind";
  }

  v1::Agent::Stub& stub() { return agent_->stub(); }

  grpc::Status CreateSandbox(const v1::CreateSandboxRequest& req) {
    Empty e;
    return stub().CreateSandbox(Ctx().get(), req, &e);
  }
  grpc::Status DestroySandbox(bool power_off = false) {
    v1::DestroySandboxRequest req;
    req.set_power_off(power_off);
    Empty e;
    return stub().DestroySandbox(Ctx().get(), req, &e);
  }
  v1::CreateSandboxRequest TmpfsSandbox(const std::string& mount_point) {
    v1::CreateSandboxRequest req;
    req.set_sandbox_id("pod-1");
    req.set_hostname("pod-one");
    req.add_dns("10.96.0.10");
    req.add_dns("search svc.cluster.local");
    req.set_sandbox_pidns(true);
    auto* s = req.add_storages();
    s->set_driver("tmpfs");
    s->set_source("podtmp");
    s->add_options("nosuid,nodev,size=1m");
    s->add_options("mode=0710");
    s->set_mount_point(mount_point);
    return req;
  }
  std::string AgentMounts() {
    auto m = agent_->ReadInAgent("/proc/self/mountinfo");
    EXPECT_OK(m);
    return m.value_or("");
  }

  std::unique_ptr<AgentUnderTest> agent_;
};

void ExpectCode(const grpc::Status& st, grpc::StatusCode code, std::string_view mention = "") {
  EXPECT_EQ(st.error_code(), code) << st.error_message();
  EXPECT_NE(st.error_message().find(mention), std::string::npos) << st.error_message();
}

TEST_F(AgentServiceTest, CheckServesTheAgentServiceOnly) {
  v1::CheckRequest req;
  v1::CheckResponse resp;
  ASSERT_OK(stub().Check(Ctx().get(), req, &resp));
  EXPECT_EQ(resp.status(), v1::CheckResponse::SERVING);
  req.set_service("capsule.agent.v1.Agent");
  ASSERT_OK(stub().Check(Ctx().get(), req, &resp));
  EXPECT_EQ(resp.status(), v1::CheckResponse::SERVING);
  req.set_service("grpc.health.v1.Nope");
  ExpectCode(stub().Check(Ctx().get(), req, &resp), grpc::StatusCode::NOT_FOUND, "grpc.health.v1.Nope");
}

TEST_F(AgentServiceTest, VersionReportsBuildApiKernelAndReadyTime) {
  v1::VersionResponse resp;
  ASSERT_OK(stub().Version(Ctx().get(), v1::VersionRequest(), &resp));
  EXPECT_EQ(resp.agent_version(), kVersion);
  EXPECT_EQ(resp.api_version(), guest_abi::kAgentApiVersion);
  utsname u{};
  ASSERT_EQ(::uname(&u), 0);
  EXPECT_EQ(resp.kernel_release(), u.release);
  EXPECT_GT(resp.ready_monotonic_us(), 0u);
}

TEST_F(AgentServiceTest, ReadGuestFileIsBounded) {
  std::string content(300, 'x');
  content[0] = 'A';
  ASSERT_OK(WriteFile(agent_->dir().Join("f"), content));
  auto head = agent_->ReadInAgent(agent_->dir().Join("f"), 10);
  ASSERT_OK(head);
  EXPECT_EQ(*head, content.substr(0, 10));
  auto all = agent_->ReadInAgent(agent_->dir().Join("f"), 4096);
  ASSERT_OK(all);
  EXPECT_EQ(*all, content);
  auto proc = agent_->ReadInAgent("/proc/self/status", 4096);  // size 0 in stat, data on read
  ASSERT_OK(proc);
  EXPECT_NE(proc->find("Pid:"), std::string::npos);
}

TEST_F(AgentServiceTest, ReadGuestFileErrors) {
  auto missing = agent_->ReadInAgent(agent_->dir().Join("nope"));
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
  EXPECT_EQ(agent_->ReadInAgent("etc/passwd").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(agent_->ReadInAgent("/etc/../etc/passwd").status().code(), Code::kInvalidArgument);
  auto zero = agent_->ReadInAgent("/proc/self/status", 0);
  EXPECT_EQ(zero.status().code(), Code::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("max_bytes"), std::string::npos);
  EXPECT_EQ(agent_->ReadInAgent("/proc/self/status", 2 * 1024 * 1024).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(agent_->ReadInAgent(agent_->dir().path()).status().code(), Code::kFailedPrecondition);
  // A FIFO with no writer would block a plain open(2) forever.
  std::string fifo = agent_->dir().Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(agent_->ReadInAgent(fifo).status().code(), Code::kFailedPrecondition);
}

TEST_F(AgentServiceTest, CreateSandboxMountsTmpfsSetsHostnameAndDns) {
  const std::string mp = agent_->dir().Join("sandbox/tmp");
  ASSERT_OK(CreateSandbox(TmpfsSandbox(mp)));

  std::string mounts = AgentMounts();
  size_t line = mounts.find(" " + mp + " ");
  ASSERT_NE(line, std::string::npos) << mounts;
  std::string entry = mounts.substr(line, mounts.find('\n', line) - line);
  EXPECT_NE(entry.find("nosuid"), std::string::npos) << entry;
  EXPECT_NE(entry.find("nodev"), std::string::npos) << entry;
  EXPECT_NE(entry.find("tmpfs podtmp"), std::string::npos) << entry;
  EXPECT_NE(entry.find("size=1024k"), std::string::npos) << entry;
  EXPECT_NE(entry.find("mode=710"), std::string::npos) << entry;

  EXPECT_EQ(*agent_->ReadInAgent("/proc/sys/kernel/hostname"), "pod-one\n");
  EXPECT_EQ(*ReadFile(agent_->dir().Join("etc/resolv.conf")), "nameserver 10.96.0.10\nsearch svc.cluster.local\n");
  // The agent's namespaces kept all of it away from the host.
  EXPECT_EQ(ReadFile("/proc/self/mountinfo")->find(mp), std::string::npos);
  utsname u{};
  ASSERT_EQ(::uname(&u), 0);
  EXPECT_NE(std::string(u.nodename), "pod-one");
}

TEST_F(AgentServiceTest, SecondCreateSandboxIsAlreadyExists) {
  ASSERT_OK(CreateSandbox(TmpfsSandbox(agent_->dir().Join("a"))));
  auto again = TmpfsSandbox(agent_->dir().Join("b"));
  again.set_sandbox_id("pod-2");
  ExpectCode(CreateSandbox(again), grpc::StatusCode::ALREADY_EXISTS, "pod-1");
  EXPECT_EQ(AgentMounts().find(agent_->dir().Join("b")), std::string::npos);
}

TEST_F(AgentServiceTest, DestroySandboxUnmountsAndAllowsANewOne) {
  const std::string mp = agent_->dir().Join("sb");
  ASSERT_OK(CreateSandbox(TmpfsSandbox(mp)));
  ASSERT_NE(AgentMounts().find(" " + mp + " "), std::string::npos);
  ASSERT_OK(DestroySandbox());
  EXPECT_EQ(AgentMounts().find(" " + mp + " "), std::string::npos);
  EXPECT_OK(DestroySandbox()) << "a second destroy is a no-op";
  EXPECT_OK(CreateSandbox(TmpfsSandbox(mp)));
}

TEST_F(AgentServiceTest, FailedStorageRollsBackEarlierMounts) {
  const std::string first = agent_->dir().Join("first");
  auto req = TmpfsSandbox(first);
  auto* bad = req.add_storages();
  bad->set_driver("bind");
  bad->set_source(agent_->dir().Join("no-such-source"));
  bad->set_mount_point(agent_->dir().Join("second"));
  ExpectCode(CreateSandbox(req), grpc::StatusCode::NOT_FOUND, "storages[1]");
  EXPECT_EQ(AgentMounts().find(" " + first + " "), std::string::npos) << "first storage left mounted";
  EXPECT_OK(CreateSandbox(TmpfsSandbox(first))) << "the failed attempt left no sandbox behind";
}

TEST_F(AgentServiceTest, BindStorageIsReadOnlyWhenAsked) {
  ASSERT_OK(MkdirAll(agent_->dir().Join("src")));
  ASSERT_OK(WriteFile(agent_->dir().Join("src/hello"), "hi"));
  v1::CreateSandboxRequest req;
  req.set_sandbox_id("pod-b");
  auto* s = req.add_storages();
  s->set_driver("bind");
  s->set_source(agent_->dir().Join("src"));
  s->add_options("ro");
  s->set_mount_point(agent_->dir().Join("dst"));
  ASSERT_OK(CreateSandbox(req));
  EXPECT_EQ(*agent_->ReadInAgent(agent_->dir().Join("dst/hello")), "hi");
  std::string mounts = AgentMounts();
  size_t line = mounts.find(" " + agent_->dir().Join("dst") + " ");
  ASSERT_NE(line, std::string::npos);
  EXPECT_EQ(mounts.compare(mounts.find(' ', line + 1 + agent_->dir().Join("dst").size()) + 1, 3, "ro,"), 0)
      << mounts.substr(line, 200);
}

// SetupSandbox checks the whole request first, then applies its steps in
// order and stops at the first failure, naming it: here the clock, which an
// agent on a host (--no-init) refuses to set, so the sandbox after it is
// never made. The steps that do apply are covered in a real VM by the
// pooled-VM clock and reseed e2e tests.
TEST_F(AgentServiceTest, SetupSandboxNamesTheStepThatFailedAndAppliesNoneAfterIt) {
  const std::string mp = agent_->dir().Join("setup");
  v1::SetupSandboxRequest req;
  req.mutable_time()->set_seconds(1700000000);
  req.mutable_randomness()->set_data(std::string(512, 'r'));
  *req.mutable_sandbox() = TmpfsSandbox(mp);
  v1::SetupSandboxResponse resp;
  auto call = [&](const v1::SetupSandboxRequest& r) { return stub().SetupSandbox(Ctx().get(), r, &resp); };

  v1::SetupSandboxRequest bad = req;
  bad.clear_time();
  ExpectCode(call(bad), grpc::StatusCode::INVALID_ARGUMENT, "time is required");
  bad = req;
  bad.mutable_randomness()->set_data(std::string(31, 'r'));
  ExpectCode(call(bad), grpc::StatusCode::INVALID_ARGUMENT, "randomness: at least 32 bytes");
  bad = req;
  bad.clear_sandbox();
  ExpectCode(call(bad), grpc::StatusCode::INVALID_ARGUMENT, "sandbox is required");
  bad = req;
  bad.mutable_time()->set_nanos(2000000000);
  ExpectCode(call(bad), grpc::StatusCode::INVALID_ARGUMENT, "time: ");

  ExpectCode(call(req), grpc::StatusCode::FAILED_PRECONDITION, "time: the agent runs as a host process");
  EXPECT_EQ(AgentMounts().find(mp), std::string::npos) << "a step after the failed one was applied";
  EXPECT_OK(CreateSandbox(TmpfsSandbox(mp))) << "no sandbox was left by the failed set-up";
}

TEST_F(AgentServiceTest, BadSandboxRequestsNameTheField) {
  auto req = TmpfsSandbox(agent_->dir().Join("x"));
  req.set_sandbox_id("");
  ExpectCode(CreateSandbox(req), grpc::StatusCode::INVALID_ARGUMENT, "sandbox_id");
  req = TmpfsSandbox(agent_->dir().Join("x"));
  req.mutable_storages(0)->set_driver("nfs");
  ExpectCode(CreateSandbox(req), grpc::StatusCode::INVALID_ARGUMENT, "storages[0].driver");
  req = TmpfsSandbox("relative");
  ExpectCode(CreateSandbox(req), grpc::StatusCode::INVALID_ARGUMENT, "storages[0].mount_point");
  req = TmpfsSandbox(agent_->dir().Join("x"));
  req.add_dns("nameserver 1.1.1.1\nnameserver 6.6.6.6");
  ExpectCode(CreateSandbox(req), grpc::StatusCode::INVALID_ARGUMENT, "dns[2]");
  req = TmpfsSandbox(agent_->dir().Join("x"));
  req.set_hostname("not_valid");
  ExpectCode(CreateSandbox(req), grpc::StatusCode::INVALID_ARGUMENT, "hostname");
  req = TmpfsSandbox(agent_->dir().Join("x"));
  req.mutable_storages(0)->add_options("size=1m,,ro");
  ExpectCode(CreateSandbox(req), grpc::StatusCode::INVALID_ARGUMENT, "storages[0].options");
  req = TmpfsSandbox(agent_->dir().Join("x"));
  req.add_kernel_modules("no_such_module");
  ExpectCode(CreateSandbox(req), grpc::StatusCode::NOT_FOUND, "kernel_modules");
  EXPECT_EQ(AgentMounts().find(agent_->dir().Join("x")), std::string::npos);
}

TEST_F(AgentServiceTest, ContainerRpcsCheckTheirFieldsAndNeedASandbox) {
  v1::StartContainerRequest start;
  start.set_container_id("c1");
  v1::StartContainerResponse started;
  ExpectCode(stub().StartContainer(Ctx().get(), start, &started), grpc::StatusCode::FAILED_PRECONDITION,
             "CreateSandbox");
  v1::WaitProcessResponse waited;
  ExpectCode(stub().WaitProcess(Ctx().get(), v1::WaitProcessRequest(), &waited), grpc::StatusCode::INVALID_ARGUMENT,
             "container_id");
}

TEST_F(AgentServiceTest, GuestTimeIsValidatedAndRefusedOnAHost) {
  v1::SetGuestTimeRequest req;
  Empty e;
  req.set_seconds(1700000000);
  req.set_nanos(1000000000);
  ExpectCode(stub().SetGuestTime(Ctx().get(), req, &e), grpc::StatusCode::INVALID_ARGUMENT, "nanos");
  req.set_nanos(5);
  ExpectCode(stub().SetGuestTime(Ctx().get(), req, &e), grpc::StatusCode::FAILED_PRECONDITION, "--no-init");
}

TEST_F(AgentServiceTest, AddRandomnessChecksSizeAndCountsReseeds) {
  v1::AddRandomnessRequest req;
  v1::AddRandomnessResponse resp;
  ExpectCode(stub().AddRandomness(Ctx().get(), req, &resp), grpc::StatusCode::INVALID_ARGUMENT, "empty");
  req.set_data(std::string(64 * 1024 + 1, 'r'));
  ExpectCode(stub().AddRandomness(Ctx().get(), req, &resp), grpc::StatusCode::INVALID_ARGUMENT, "at most");
  req.set_data(std::string(64, '\x5a'));
  ASSERT_OK(stub().AddRandomness(Ctx().get(), req, &resp));
  EXPECT_EQ(resp.reseeds(), 1u);
  EXPECT_EQ(resp.bytes_added(), 64u);
  ASSERT_OK(stub().AddRandomness(Ctx().get(), req, &resp));
  EXPECT_EQ(resp.reseeds(), 2u) << "each call reseeds the CRNG once more";
  EXPECT_EQ(resp.bytes_added(), 128u);
}

TEST_F(AgentServiceTest, DestroySandboxPowerOffRepliesThenStops) {
  ASSERT_OK(CreateSandbox(TmpfsSandbox(agent_->dir().Join("p"))));
  // The reply arrives (OK) although the agent goes away right after it; as a
  // host process "power off" means a clean exit.
  ASSERT_OK(DestroySandbox(/*power_off=*/true));
  auto status = agent_->process().Wait(std::chrono::milliseconds(20000));
  ASSERT_OK(status);
  EXPECT_EQ(ExitCode(*status), 0);
  EXPECT_NE(::access(agent_->socket_path().c_str(), F_OK), 0) << "socket left behind";
}

}  // namespace
}  // namespace capsule::agent::testing
