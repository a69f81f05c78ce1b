// The service's two seams: a ContainerOps plugged into it receives the
// container RPCs, and an engine error keeps its code; the sandbox RPCs make
// and end the pod in a real PodSlot (over a fake engine). Served in-process
// on a unix socket, as the agent does.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>

#include "agent/pod/pod_slot.h"
#include "agent/server/agent_service.h"
#include "agent/server/grpc_server.h"
#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "tests/agent/support/fake_engine.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::server {
namespace {

class FakeLifecycle : public AgentLifecycle {
 public:
  void RequestPowerOff(std::string_view) override { ++power_offs; }
  bool shutting_down() const override { return false; }
  uint64_t ready_monotonic_us() const override { return 1; }
  std::atomic<int> power_offs{0};
};

class FakeOps : public ContainerOps {
 public:
  Result<v1::StartContainerResponse> StartContainer(const v1::StartContainerRequest& req, AfterAnswer&) override {
    if (req.container_id() != "c1") return NotFound("container " + req.container_id() + " not found");
    v1::StartContainerResponse resp;
    resp.set_pid(42);
    return resp;
  }
};

class ContainerOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("seam");
    ASSERT_OK(dir);
    dir_.emplace(std::move(dir).value());
    pod::PodEnvironment env;
    env.resolv_conf_path = dir_->Join("resolv.conf");
    env.apply_hostname = false;
    auto fakes = fakes::FakeEngines(&engines_);
    pods_ = std::make_unique<pod::PodSlot>(env, [this, fakes]() -> Result<engine::ContainerManagerPtr> {
      if (refuse_engine_) return Internal("engine refuses");
      return fakes();
    });
    service_ = std::make_unique<AgentService>(AgentServiceOptions{false}, pods_.get(), &lifecycle_);
  }
  void Serve() {
    Endpoint ep{Endpoint::Kind::kUnix, 0, dir_->Join("a.sock")};
    auto server = AgentServer::Start(service_.get(), {ep});
    ASSERT_OK(server);
    server_ = std::move(server).value();
    stub_ = v1::Agent::NewStub(grpc::CreateChannel("unix:" + ep.path, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    stub_.reset();
    if (server_) server_->Shutdown(std::chrono::milliseconds(0));
  }
  static std::unique_ptr<grpc::ClientContext> Ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return c;
  }

  std::optional<TempDir> dir_;
  FakeLifecycle lifecycle_;
  FakeOps ops_;
  fakes::FakeEngineLog engines_;
  bool refuse_engine_ = false;
  std::unique_ptr<pod::PodSlot> pods_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<AgentServer> server_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

TEST_F(ContainerOpsTest, WithoutEngineContainerRpcsAreUnimplemented) {
  Serve();
  v1::StartContainerRequest req;
  req.set_container_id("c1");
  v1::StartContainerResponse resp;
  EXPECT_EQ(stub_->StartContainer(Ctx().get(), req, &resp).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(ContainerOpsTest, OpsGetTheContainerRpcsAndTheSandboxRpcsMakeAndEndThePod) {
  service_->SetContainerOps(&ops_);
  Serve();
  v1::StartContainerRequest req;
  req.set_container_id("c1");
  v1::StartContainerResponse resp;
  ASSERT_OK(stub_->StartContainer(Ctx().get(), req, &resp));
  EXPECT_EQ(resp.pid(), 42u);
  req.set_container_id("c2");
  grpc::Status missing = stub_->StartContainer(Ctx().get(), req, &resp);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error_message(), "container c2 not found");
  // Not overridden by the fake: the ContainerOps default.
  v1::ListProcessesResponse list;
  EXPECT_EQ(stub_->ListProcesses(Ctx().get(), v1::ListProcessesRequest(), &list).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  v1::CreateSandboxRequest create;
  create.set_sandbox_id("pod-9");
  create.set_sandbox_pidns(true);
  google::protobuf::Empty e;
  ASSERT_OK(stub_->CreateSandbox(Ctx().get(), create, &e));
  auto pod = pods_->Current();
  ASSERT_OK(pod);
  EXPECT_EQ((*pod)->id(), "pod-9");
  EXPECT_TRUE((*pod)->identity().sandbox_pidns);
  EXPECT_EQ(engines_.engines, 1);
  EXPECT_EQ(stub_->CreateSandbox(Ctx().get(), create, &e).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  ASSERT_OK(stub_->DestroySandbox(Ctx().get(), v1::DestroySandboxRequest(), &e));
  EXPECT_EQ(engines_.remove_all, 1);  // the pod's containers went with it
  EXPECT_REASON(pods_->Current(), reason::kNoSandbox);
  EXPECT_EQ(lifecycle_.power_offs, 0);
}

TEST_F(ContainerOpsTest, AnEngineThatCannotBeMadeFailsCreateAndLeavesNoPod) {
  refuse_engine_ = true;
  service_->SetContainerOps(&ops_);
  Serve();
  v1::CreateSandboxRequest create;
  create.set_sandbox_id("pod-9");
  google::protobuf::Empty e;
  grpc::Status st = stub_->CreateSandbox(Ctx().get(), create, &e);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(st.error_message().find("container engine"), std::string::npos) << st.error_message();
  EXPECT_REASON(pods_->Current(), reason::kNoSandbox);
}

TEST_F(ContainerOpsTest, PowerOffIsRequestedOnceTheCallIsDone) {
  Serve();
  v1::DestroySandboxRequest req;
  req.set_power_off(true);
  google::protobuf::Empty e;
  ASSERT_OK(stub_->DestroySandbox(Ctx().get(), req, &e));
  // OnDone may run just after the client saw the reply; Shutdown waits for it.
  server_->Shutdown(std::chrono::milliseconds(1000));
  EXPECT_EQ(lifecycle_.power_offs, 1);
}

}  // namespace
}  // namespace capsule::agent::server
