// The container RPC layer without containers: request checks, the pod's
// namespace-anchor rule, proto conversions, and EngineOps over a fake
// engine (lookups, error codes, sandbox lifecycle, cancellation).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "agent/containers/convert.h"
#include "agent/containers/engine_ops.h"
#include "agent/containers/pod_namespaces.h"
#include "agent/containers/validate.h"
#include "runtime/common/reasons.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::containers {
namespace {

using oci::NamespaceType;

// ---- validate.h ----

TEST(ValidateTest, ContainerIdsAreBoundedAndPathSafe) {
  EXPECT_OK(CheckContainerId("container_id", "abc-1_2.x"));
  EXPECT_OK(CheckContainerId("container_id", std::string(128, 'a')));
  for (const std::string& bad : std::vector<std::string>{"", "..", ".", "a/b", "a b", std::string(129, 'a'),
                                                         std::string("a\0b", 3)}) {
    Status st = CheckContainerId("container_id", bad);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(st.message().rfind("container_id", 0), 0u) << st.message();
  }
}

TEST(ValidateTest, ExecIdEmptyMeansTheInitOnlyWhereAllowed) {
  EXPECT_OK(CheckExecId("exec_id", "", true));
  Status st = CheckExecId("exec_id", "", false);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("exec_id is required"), std::string::npos);
  EXPECT_EQ(CheckExecId("exec_id", "../x", true).code(), Code::kInvalidArgument);
}

TEST(ValidateTest, ProcessTargetEmptyContainerIsTheGuestAndNeedsAnExecId) {
  EXPECT_OK(CheckProcessTarget("", "dbg", false));
  Status st = CheckProcessTarget("", "", true);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("exec_id is required for a guest process"), std::string::npos) << st.message();
  EXPECT_EQ(CheckProcessTarget("", "../x", false).code(), Code::kInvalidArgument);
  EXPECT_OK(CheckProcessTarget("c1", "", true));
  EXPECT_EQ(CheckProcessTarget("c1", "", false).code(), Code::kInvalidArgument);
  EXPECT_NE(CheckProcessTarget("a/b", "e", false).message().find("container_id"), std::string::npos);
}

TEST(ValidateTest, SignalsWindowSizesAndReadLengths) {
  EXPECT_OK(CheckSignal(0));
  EXPECT_OK(CheckSignal(64));
  EXPECT_EQ(CheckSignal(65).code(), Code::kInvalidArgument);
  EXPECT_OK(CheckWinSize(65535, 1));
  EXPECT_NE(CheckWinSize(65536, 1).message().find("row 65536"), std::string::npos);
  EXPECT_NE(CheckWinSize(1, 70000).message().find("column 70000"), std::string::npos);
  EXPECT_EQ(ReadLen(0), 32u * 1024);
  EXPECT_EQ(ReadLen(5), 5u);
  EXPECT_EQ(ReadLen(64u << 20), kMaxReadLen);
}

// ---- pod_namespaces.h ----

oci::Spec SpecWith(std::map<std::string, std::string> annotations, std::string pid_path = "") {
  oci::Spec s;
  s.annotations = std::move(annotations);
  s.linux.namespaces = {{NamespaceType::kPid, pid_path}, {NamespaceType::kIpc, "/proc/9/ns/ipc"},
                        {NamespaceType::kMount, ""}};
  return s;
}

const std::map<std::string, std::string> kSandbox = {{"io.kubernetes.cri.container-type", "sandbox"},
                                                     {"io.kubernetes.cri.sandbox-id", "pause"}};
const std::map<std::string, std::string> kApp = {{"io.kubernetes.cri.container-type", "container"},
                                                 {"io.kubernetes.cri.sandbox-id", "pause"}};

TEST(PodNamespacesTest, AnnotationsGiveTheRole) {
  auto none = RoleFromAnnotations(SpecWith({}));
  ASSERT_OK(none);
  EXPECT_EQ(none->kind, ContainerKind::kUnannotated);
  EXPECT_EQ(RoleFromAnnotations(SpecWith(kSandbox))->kind, ContainerKind::kSandbox);
  auto app = RoleFromAnnotations(SpecWith(kApp));
  EXPECT_EQ(app->kind, ContainerKind::kContainer);
  EXPECT_EQ(app->sandbox_id, "pause");
  auto bogus = RoleFromAnnotations(SpecWith({{"io.kubernetes.cri.container-type", "pod"}}));
  EXPECT_EQ(bogus.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bogus.status().message().find("io.kubernetes.cri.container-type"), std::string::npos);
  auto orphan = RoleFromAnnotations(SpecWith({{"io.kubernetes.cri.container-type", "container"}}));
  EXPECT_NE(orphan.status().message().find("io.kubernetes.cri.sandbox-id"), std::string::npos);
}

TEST(PodNamespacesTest, FirstUnannotatedContainerAnchorsAndTheNextJoinIpcAndUts) {
  PodNamespaces pod(false);
  oci::Spec a = SpecWith({});
  auto first = pod.Plan("a", {}, false, &a);
  ASSERT_OK(first);
  EXPECT_TRUE(first->anchor);
  pod.Created("a", *first);
  EXPECT_EQ(pod.anchor(), "a");
  oci::Spec b = SpecWith({});
  auto second = pod.Plan("b", {}, false, &b);
  ASSERT_OK(second);
  EXPECT_FALSE(second->anchor);
  EXPECT_EQ(second->share_from, "a");
  EXPECT_EQ(second->share_types, (std::vector<NamespaceType>{NamespaceType::kIpc, NamespaceType::kUts}));
  for (const auto& ns : b.linux.namespaces) EXPECT_TRUE(ns.path.empty()) << "host path kept";
}

TEST(PodNamespacesTest, PidIsSharedWhenRequestSandboxOrSpecAsks) {
  const std::vector<NamespaceType> with_pid = {NamespaceType::kIpc, NamespaceType::kUts, NamespaceType::kPid};
  for (int way = 0; way < 3; ++way) {
    PodNamespaces pod(/*sandbox_pidns=*/way == 1);
    oci::Spec a = SpecWith({});
    pod.Created("a", *pod.Plan("a", {}, false, &a));
    oci::Spec b = SpecWith({}, way == 2 ? "/proc/77/ns/pid" : "");
    auto plan = pod.Plan("b", {}, /*request_pidns=*/way == 0, &b);
    ASSERT_OK(plan);
    EXPECT_EQ(plan->share_types, with_pid) << "way " << way;
  }
}

TEST(PodNamespacesTest, CriSandboxIsTheAnchorAndContainersMustNameIt) {
  PodNamespaces pod(false);
  oci::Spec app = SpecWith(kApp);
  auto early = pod.Plan("app", *RoleFromAnnotations(app), false, &app);
  EXPECT_EQ(early.status().code(), Code::kFailedPrecondition);
  EXPECT_REASON(early, reason::kSandboxContainerOrder);
  oci::Spec pause = SpecWith(kSandbox);
  pod.Created("pause", *pod.Plan("pause", *RoleFromAnnotations(pause), false, &pause));
  auto plan = pod.Plan("app", *RoleFromAnnotations(app), false, &app);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->share_from, "pause");
  oci::Spec second = SpecWith(kSandbox);
  auto dup = pod.Plan("pause2", *RoleFromAnnotations(second), false, &second);
  EXPECT_EQ(dup.status().code(), Code::kFailedPrecondition);
  EXPECT_REASON(dup, reason::kSandboxContainerOrder);
  EXPECT_NE(dup.status().message().find("container pause already is"), std::string::npos) << "it names the one there";
  oci::Spec other = SpecWith({{"io.kubernetes.cri.container-type", "container"},
                              {"io.kubernetes.cri.sandbox-id", "elsewhere"}});
  EXPECT_EQ(pod.Plan("x", *RoleFromAnnotations(other), false, &other).status().code(), Code::kFailedPrecondition);
}

TEST(PodNamespacesTest, RemovingTheAnchorLetsTheNextContainerAnchor) {
  PodNamespaces pod(false);
  oci::Spec a = SpecWith({});
  pod.Created("a", *pod.Plan("a", {}, false, &a));
  pod.Removed("b");  // not the anchor: no change
  EXPECT_EQ(pod.anchor(), "a");
  pod.Removed("a");
  EXPECT_FALSE(pod.anchor().has_value());
  oci::Spec c = SpecWith({});
  EXPECT_TRUE(pod.Plan("c", {}, false, &c)->anchor);
}

// ---- convert.h ----

TEST(ConvertTest, ExitInfoProcessListReadAndNetworkStats) {
  engine::ExitInfo exit;
  exit.status = 137;
  exit.oom_killed = true;
  exit.exited_at = std::chrono::system_clock::time_point(std::chrono::seconds(5));
  v1::WaitProcessResponse w = WaitResponseFromExit(exit);
  EXPECT_EQ(w.status(), 137);
  EXPECT_EQ(w.exited_at_unix_nanos(), 5'000'000'000);
  EXPECT_TRUE(w.oom_killed());
  v1::ListProcessesResponse l = ProcessListToProto({{12, "", "sleep"}, {13, "e1", "sh"}});
  ASSERT_EQ(l.processes_size(), 2);
  EXPECT_EQ(l.processes(1).pid(), 13u);
  EXPECT_EQ(l.processes(1).exec_id(), "e1");
  EXPECT_EQ(l.processes(1).command(), "sh");
  v1::ReadStreamResponse r = ReadResultToProto(engine::ReadResult{"abc", true});
  EXPECT_EQ(r.data(), "abc");
  EXPECT_TRUE(r.eof());
  v1::StatsContainerResponse s;
  net::InterfaceStats eth;
  eth.name = "eth0";
  eth.rx_bytes = 1;
  eth.tx_dropped = 9;
  NetworkStatsToProto({eth}, &s);
  ASSERT_EQ(s.network_size(), 1);
  EXPECT_EQ(s.network(0).name(), "eth0");
  EXPECT_EQ(s.network(0).rx_bytes(), 1u);
  EXPECT_EQ(s.network(0).tx_dropped(), 9u);
}

// ---- EngineOps over a fake engine ----

class FakeContainer : public engine::Container {
 public:
  explicit FakeContainer(std::string id) : id_(std::move(id)) {}
  const std::string& id() const override { return id_; }
  engine::ContainerState state() const override { return engine::ContainerState::kCreated; }
  pid_t init_pid() const override { return 42; }
  Result<pid_t> Start() override { return 42; }
  Result<pid_t> Exec(const std::string&, const oci::Process&) override { return 43; }
  Status Signal(const std::string& exec_id, int, bool) override {
    return exec_id == "gone" ? NotFound("process gone has exited") : Status::Ok();
  }
  using engine::Container::Wait;
  Result<engine::ExitInfo> Wait(const std::string&, const engine::CancelCheck& cancel) override {
    while (!cancel.cancelled()) std::this_thread::yield();
    return Cancelled("wait: the caller gave up");
  }
  Status RemoveProcess(const std::string&) override { return Status::Ok(); }
  Result<engine::ProcessIoPtr> Io(const std::string&) override { return NotFound("no io"); }
  Result<std::vector<engine::ProcessInfo>> ListProcesses() override {
    return std::vector<engine::ProcessInfo>{{42, "", "sleep"}};
  }
  Status Update(const oci::LinuxResources&) override { return Status::Ok(); }
  Result<engine::CgroupMetrics> Stats() override { return engine::CgroupMetrics{}; }
  Status Pause() override { return Status::Ok(); }
  Status Resume() override { return Status::Ok(); }
  Result<std::string> NamespacePath(NamespaceType) const override { return std::string("/proc/42/ns/x"); }
  Result<engine::NamespaceFds> ShareNamespaces(const std::vector<NamespaceType>&) const override {
    return engine::NamespaceFds{};
  }

 private:
  std::string id_;
};

struct FakeEngineLog {
  std::map<std::string, engine::CreateOptions> created;
  int remove_all = 0;
};

class FakeEngine : public engine::ContainerManager {
 public:
  explicit FakeEngine(FakeEngineLog* log) : log_(log) {}
  Result<engine::ContainerPtr> Create(const std::string& id, const oci::Spec&,
                                      const engine::CreateOptions& options) override {
    log_->created[id] = options;
    return containers_[id] = std::make_shared<FakeContainer>(id);
  }
  Result<engine::ContainerPtr> Get(const std::string& id) const override {
    auto it = containers_.find(id);
    if (it == containers_.end()) return NotFound("container " + id + " not found");
    return it->second;
  }
  std::vector<engine::ContainerPtr> List() const override { return {}; }
  Status Remove(const std::string& id, std::chrono::milliseconds) override {
    return containers_.erase(id) ? Status::Ok() : NotFound("container " + id + " not found");
  }
  Status RemoveAll(std::chrono::milliseconds) override {
    ++log_->remove_all;
    containers_.clear();
    return Status::Ok();
  }
  std::optional<std::string> WaitOomEvent(std::chrono::milliseconds) override { return std::nullopt; }

 private:
  FakeEngineLog* log_;
  std::map<std::string, engine::ContainerPtr> containers_;
};

class FlagContext : public server::CallContext {
 public:
  bool cancelled() const override { return cancelled_.load(); }
  std::atomic<bool> cancelled_{false};
};

class EngineOpsTest : public ::testing::Test {
 protected:
  EngineOpsTest()
      : ops_([this]() -> Result<engine::ContainerManagerPtr> {
          return engine::ContainerManagerPtr(std::make_unique<FakeEngine>(&log_));
        }) {}

  Status Create(const std::string& id, const std::string& json, bool pidns = false) {
    v1::CreateContainerRequest req;
    req.set_container_id(id);
    req.set_oci_spec_json(json);
    req.set_sandbox_pidns(pidns);
    return ops_.CreateContainer(req);
  }
  static constexpr const char* kSpec = R"({"ociVersion":"1.0.2","root":{"path":"/r"},"process":{"args":["x"],"cwd":"/"}})";

  FakeEngineLog log_;
  EngineOps ops_;
  sandbox::SandboxInfo pod_{"pod", "", false, {}};
};

TEST_F(EngineOpsTest, WithoutASandboxContainerCallsFailWithFailedPrecondition) {
  Status st = Create("c1", kSpec);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_REASON(st, reason::kNoSandbox);
  v1::StartContainerRequest start;
  start.set_container_id("c1");
  EXPECT_EQ(ops_.StartContainer(start).status().code(), Code::kFailedPrecondition);
  EXPECT_REASON(ops_.StartContainer(start), reason::kNoSandbox);
  FlagContext ctx;
  EXPECT_EQ(ops_.GetOOMEvent({}, ctx).status().code(), Code::kFailedPrecondition);
}

TEST_F(EngineOpsTest, BadRequestsNameTheirField) {
  ASSERT_OK(ops_.SandboxCreated(pod_));
  EXPECT_NE(Create("c1", "{oops").message().find("oci_spec_json"), std::string::npos);
  EXPECT_NE(Create("c1", "").message().find("oci_spec_json is required"), std::string::npos);
  EXPECT_NE(Create("", kSpec).message().find("container_id is required"), std::string::npos);
  v1::ExecProcessRequest exec;
  exec.set_container_id("c1");
  exec.set_exec_id("e1");
  exec.set_process_json(R"({"args": 5})");
  Status st = ops_.ExecProcess(exec).status();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("process_json"), std::string::npos) << st.message();
  v1::SignalProcessRequest sig;
  sig.set_container_id("c1");
  sig.set_signal(200);
  EXPECT_NE(ops_.SignalProcess(sig).message().find("signal 200"), std::string::npos);
  v1::UpdateContainerRequest update;
  update.set_container_id("c1");
  update.set_resources_json("[1]");
  EXPECT_NE(ops_.UpdateContainer(update).message().find("resources_json"), std::string::npos);
}

TEST_F(EngineOpsTest, GuestProcessesNeedASandboxAnEngineThatRunsThemAndAValidRequest) {
  v1::ExecGuestProcessRequest req;
  req.set_exec_id("dbg");
  req.set_process_json(R"({"args":["sh"],"cwd":"/"})");
  EXPECT_EQ(ops_.ExecGuestProcess(req).status().code(), Code::kFailedPrecondition);
  ASSERT_OK(ops_.SandboxCreated(pod_));
  // The fake engine has no guest processes: the protocol's "unimplemented".
  Status st = ops_.ExecGuestProcess(req).status();
  EXPECT_EQ(st.code(), Code::kUnimplemented) << st.ToString();
  v1::WaitProcessRequest wait;
  wait.set_exec_id("dbg");
  FlagContext ctx;
  EXPECT_EQ(ops_.WaitProcess(wait, ctx).status().code(), Code::kUnimplemented);
  req.set_tools_container_id("a/b");
  EXPECT_NE(ops_.ExecGuestProcess(req).status().message().find("tools_container_id"), std::string::npos);
  req.set_tools_container_id("");
  req.set_process_json(R"({"args":[]})");
  EXPECT_NE(ops_.ExecGuestProcess(req).status().message().find("process_json"), std::string::npos);
  req.set_exec_id("");
  EXPECT_NE(ops_.ExecGuestProcess(req).status().message().find("exec_id"), std::string::npos);
}

TEST_F(EngineOpsTest, TheSecondContainerJoinsTheFirstAndDuplicatesAreRefused) {
  ASSERT_OK(ops_.SandboxCreated(pod_));
  ASSERT_OK(Create("a", kSpec));
  ASSERT_OK(Create("b", kSpec, /*pidns=*/true));
  EXPECT_TRUE(log_.created["a"].share_namespaces_from.empty());
  EXPECT_EQ(log_.created["b"].share_namespaces_from, "a");
  EXPECT_EQ(log_.created["b"].share_types.size(), 3u);
  EXPECT_EQ(Create("a", kSpec).code(), Code::kAlreadyExists);
  v1::StartContainerRequest start;
  start.set_container_id("b");
  EXPECT_EQ(ops_.StartContainer(start)->pid(), 42u);
  v1::SignalProcessRequest sig;
  sig.set_container_id("b");
  sig.set_exec_id("gone");
  sig.set_signal(9);
  EXPECT_EQ(ops_.SignalProcess(sig).code(), Code::kNotFound);
}

TEST_F(EngineOpsTest, DestroyingTheSandboxEmptiesTheEngineAndEndsCalls) {
  ASSERT_OK(ops_.SandboxCreated(pod_));
  ASSERT_OK(Create("a", kSpec));
  EXPECT_EQ(ops_.SandboxCreated(pod_).code(), Code::kFailedPrecondition);  // one engine per sandbox
  ASSERT_OK(ops_.SandboxDestroying(pod_));
  EXPECT_EQ(log_.remove_all, 1);
  EXPECT_EQ(Create("b", kSpec).code(), Code::kFailedPrecondition);
  ASSERT_OK(ops_.SandboxDestroying(pod_));  // idempotent
  ASSERT_OK(ops_.SandboxCreated(pod_));     // and a new sandbox gets a fresh engine
  EXPECT_OK(Create("a", kSpec));
}

TEST_F(EngineOpsTest, BlockingCallsReturnCancelledOnceTheCallerGivesUp) {
  ASSERT_OK(ops_.SandboxCreated(pod_));
  ASSERT_OK(Create("a", kSpec));
  FlagContext ctx;
  ctx.cancelled_ = true;
  v1::WaitProcessRequest wait;
  wait.set_container_id("a");
  EXPECT_EQ(ops_.WaitProcess(wait, ctx).status().code(), Code::kCancelled);
  EXPECT_EQ(ops_.GetOOMEvent({}, ctx).status().code(), Code::kCancelled);
}

TEST_F(EngineOpsTest, GetOomEventEndsWhenTheSandboxIsDestroyed) {
  ASSERT_OK(ops_.SandboxCreated(pod_));
  FlagContext ctx;
  std::thread destroyer([&] { ASSERT_OK(ops_.SandboxDestroying(pod_)); });
  auto event = ops_.GetOOMEvent({}, ctx);
  destroyer.join();
  // Whether the poll saw the sandbox go or started after it went.
  EXPECT_EQ(event.status().code(), Code::kFailedPrecondition) << event.status().ToString();
}

}  // namespace
}  // namespace capsule::agent::containers
