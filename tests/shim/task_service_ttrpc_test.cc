// The Task service as containerd reaches it: over a real ttrpc unix socket
// (runtime/ttrpc Server + Client), with events delivered by the real
// QueuedPublisher/TtrpcSender to a stand-in for containerd's
// `containerd.services.events.ttrpc.v1.Events/Forward`. Checks the wire
// contract: service/method names, status codes containerd keys on (5, 6, 9,
// 12), Wait concurrent with Start on one connection, and envelopes with
// timestamp, namespace, topic order and bare Any type_urls. The VM and the
// agent are fakes; tests/e2e runs the same calls under real containerd.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <future>
#include <mutex>

#include <google/protobuf/empty.pb.h>

#include "containerd/events/task.pb.h"
#include "runtime/ttrpc/client.h"
#include "runtime/ttrpc/server.h"
#include "shim/events/queued_publisher.h"
#include "shim/events/senders.h"
#include "shim/service/task_service.h"
#include "tests/shim/fakes/fake_mounter.h"
#include "tests/shim/fakes/fake_vm.h"
#include "tests/shim/fakes/test_bundle.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

namespace v2 = ::containerd::task::v2;
namespace cev = ::containerd::events;
namespace ev = ::containerd::services::events::ttrpc::v1;
using Empty = ::google::protobuf::Empty;
using std::chrono::milliseconds;

constexpr const char* kNs = "wire-ns";
constexpr const char* kTask = "containerd.task.v2.Task";

// containerd's side of event delivery: records every Forward in order.
class FakeEventsService {
 public:
  explicit FakeEventsService(const std::string& path) {
    server_.RegisterMethod<ev::ForwardRequest, Empty>(
        shim::events::kEventsService, shim::events::kForwardMethod,
        [this](const ttrpc::CallContext& ctx, const ev::ForwardRequest& req) -> Result<Empty> {
          std::lock_guard lock(mu_);
          envelopes_.push_back(req.envelope());
          namespaces_.push_back(ctx.Get(shim::events::kNamespaceMetadataKey).value_or(""));
          cv_.notify_all();
          return Empty();
        });
    Status st = server_.Listen(path);
    EXPECT_OK(st);
  }
  bool WaitForCount(size_t n, milliseconds timeout = milliseconds(10000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return envelopes_.size() >= n; });
  }
  std::vector<ev::Envelope> envelopes() const {
    std::lock_guard lock(mu_);
    return envelopes_;
  }
  std::vector<std::string> metadata_namespaces() const {
    std::lock_guard lock(mu_);
    return namespaces_;
  }

 private:
  ttrpc::Server server_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ev::Envelope> envelopes_;  // guarded by mu_
  std::vector<std::string> namespaces_;  // guarded by mu_
};

class TaskServiceTtrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = TempDir::Create("shimwire");
    ASSERT_OK(t);
    tmp_.emplace(std::move(*t));
    events_server_ = std::make_unique<FakeEventsService>(tmp_->Join("containerd.sock.ttrpc"));
    publisher_ = std::make_unique<shim::events::QueuedPublisher>(
        kNs, std::make_unique<shim::events::TtrpcSender>(tmp_->Join("containerd.sock.ttrpc")));
    vms_ = std::make_unique<FakeVmProvider>(tmp_->Join("state"));
    shim::task::TaskManagerDeps d;
    d.ns = kNs;
    d.vms = vms_.get();
    d.mounter = &mounter_;
    d.events = publisher_.get();
    tasks_ = std::make_unique<shim::task::TaskManager>(d);
    service_ = std::make_unique<shim::service::TaskService>(tasks_.get(), publisher_.get(), [this](std::string) {
      shutdown_requested_.store(true);
    });
    server_ = std::make_unique<ttrpc::Server>();
    service_->Register(*server_);
    ASSERT_OK(server_->Listen(tmp_->Join("shim.sock")));
    auto c = ttrpc::Client::Dial(tmp_->Join("shim.sock"), milliseconds(2000));
    ASSERT_OK(c);
    client_ = std::move(*c);
  }
  void TearDown() override {
    client_->Close();
    server_->Shutdown();
    tasks_->StopAll();
    publisher_->Close(milliseconds(2000));
    EXPECT_EQ(vms_->live_vms(), 0) << "a VM was left running";
    EXPECT_TRUE(mounter_.live().empty()) << "a mount was left";
  }

  template <typename Req, typename Resp>
  Status Call(const std::string& method, const Req& req, Resp* resp) {
    ttrpc::CallOptions o;
    o.timeout = milliseconds(10000);
    o.metadata = {{"containerd-namespace-ttrpc", kNs}};
    return client_->Call(kTask, method, req, resp, o);
  }
  v2::CreateTaskRequest CreateReq(const std::string& id) {
    v2::CreateTaskRequest req;
    req.set_id(id);
    req.set_bundle(MakeBundle(tmp_->path(), id, BaseSpec()));
    auto* m = req.add_rootfs();
    m->set_type("overlay");
    m->set_source("overlay");
    m->add_options("lowerdir=/l");
    return req;
  }

  std::optional<TempDir> tmp_;
  std::unique_ptr<FakeEventsService> events_server_;
  std::unique_ptr<shim::events::QueuedPublisher> publisher_;
  std::unique_ptr<FakeVmProvider> vms_;
  FakeMounter mounter_;
  std::unique_ptr<shim::task::TaskManager> tasks_;
  std::unique_ptr<shim::service::TaskService> service_;
  std::unique_ptr<ttrpc::Server> server_;
  ttrpc::ClientPtr client_;
  std::atomic<bool> shutdown_requested_{false};
};

TEST_F(TaskServiceTtrpcTest, CtrRunOverTheWireDeliversOrderedBareEnvelopes) {
  vms_->next_agent()->SetScript("c1", "", {"", "", 3});
  v2::CreateTaskResponse created;
  ASSERT_OK(Call("Create", CreateReq("c1"), &created));
  EXPECT_EQ(created.pid(), static_cast<uint32_t>(::getpid()));

  v2::ConnectRequest conn_req;
  conn_req.set_id("c1");
  v2::ConnectResponse conn;
  ASSERT_OK(Call("Connect", conn_req, &conn));
  EXPECT_EQ(conn.shim_pid(), static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(conn.task_pid(), created.pid());

  // containerd sends Wait before Start, on the same connection.
  v2::WaitRequest wait_req;
  wait_req.set_id("c1");
  auto waited = std::async(std::launch::async, [&] {
    v2::WaitResponse r;
    Status st = Call("Wait", wait_req, &r);
    return std::make_pair(st, r);
  });
  EXPECT_EQ(waited.wait_for(milliseconds(100)), std::future_status::timeout) << "Wait returned before Start";
  v2::StartRequest start_req;
  start_req.set_id("c1");
  v2::StartResponse started;
  ASSERT_OK(Call("Start", start_req, &started));
  auto [wait_status, wait_resp] = waited.get();
  ASSERT_OK(wait_status);
  EXPECT_EQ(wait_resp.exit_status(), 3u);

  v2::KillRequest kill_req;
  kill_req.set_id("c1");
  kill_req.set_signal(SIGKILL);
  Empty empty;
  EXPECT_EQ(Call("Kill", kill_req, &empty).code(), Code::kNotFound) << "kill after exit is NotFound on the wire";

  v2::DeleteRequest del_req;
  del_req.set_id("c1");
  v2::DeleteResponse deleted;
  ASSERT_OK(Call("Delete", del_req, &deleted));
  EXPECT_EQ(deleted.exit_status(), 3u);
  EXPECT_GT(deleted.exited_at().seconds(), 0);
  ASSERT_OK(Call("Shutdown", v2::ShutdownRequest(), &empty));
  EXPECT_TRUE(shutdown_requested_.load());

  ASSERT_TRUE(events_server_->WaitForCount(4)) << "events did not reach containerd";
  const auto envs = events_server_->envelopes();
  const std::vector<std::pair<std::string, std::string>> want = {
      {"/tasks/create", "containerd.events.TaskCreate"},
      {"/tasks/start", "containerd.events.TaskStart"},
      {"/tasks/exit", "containerd.events.TaskExit"},
      {"/tasks/delete", "containerd.events.TaskDelete"}};
  ASSERT_EQ(envs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(envs[i].topic(), want[i].first);
    EXPECT_EQ(envs[i].event().type_url(), want[i].second) << "type_url must be the bare name";
    EXPECT_EQ(envs[i].namespace_(), kNs);
    EXPECT_GT(envs[i].timestamp().seconds(), 0) << "containerd rejects an envelope without a timestamp";
  }
  for (const auto& ns : events_server_->metadata_namespaces()) EXPECT_EQ(ns, kNs);
  cev::TaskExit exit;
  ASSERT_TRUE(exit.ParseFromString(envs[2].event().value()));
  EXPECT_EQ(exit.container_id(), "c1");
  EXPECT_EQ(exit.exit_status(), 3u);
}

TEST_F(TaskServiceTtrpcTest, WireErrorsCarryContainerdsCodes) {
  Empty empty;
  v2::StateRequest state_req;
  state_req.set_id("nope");
  v2::StateResponse state;
  Status st = Call("State", state_req, &state);
  EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("nope"), std::string::npos) << "the error names the id: " << st.message();

  EXPECT_EQ(client_->CallRaw(kTask, "NoSuchMethod", "", {}).status().code(), Code::kUnimplemented);
  v2::CheckpointTaskRequest cp;
  cp.set_id("c1");
  EXPECT_EQ(Call("Checkpoint", cp, &empty).code(), Code::kUnimplemented);

  vms_->next_agent()->SetScript("c1", "", {"", "", std::nullopt});  // runs until killed
  v2::CreateTaskResponse created;
  ASSERT_OK(Call("Create", CreateReq("c1"), &created));
  EXPECT_EQ(Call("Create", CreateReq("c1"), &created).code(), Code::kAlreadyExists);
  v2::StartRequest start_req;
  start_req.set_id("c1");
  v2::StartResponse started;
  ASSERT_OK(Call("Start", start_req, &started));
  v2::DeleteRequest del_req;
  del_req.set_id("c1");
  v2::DeleteResponse deleted;
  EXPECT_EQ(Call("Delete", del_req, &deleted).code(), Code::kFailedPrecondition) << "delete while running";

  v2::KillRequest kill_req;
  kill_req.set_id("c1");
  kill_req.set_signal(SIGKILL);
  ASSERT_OK(Call("Kill", kill_req, &empty));
  v2::WaitRequest wait_req;
  wait_req.set_id("c1");
  v2::WaitResponse waited;
  ASSERT_OK(Call("Wait", wait_req, &waited));
  EXPECT_EQ(waited.exit_status(), 128u + SIGKILL);
  ASSERT_OK(Call("Delete", del_req, &deleted));
  EXPECT_EQ(Call("Delete", del_req, &deleted).code(), Code::kNotFound);
}

}  // namespace
}  // namespace capsule::testing
