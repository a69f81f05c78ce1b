// The container RPC layer without containers: request checks, proto
// conversions, and EngineOps over a fake engine in a real PodSlot (lookups,
// error codes, the pod's end, cancellation).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "agent/containers/convert.h"
#include "agent/containers/engine_ops.h"
#include "agent/containers/validate.h"
#include "agent/pod/pod_slot.h"
#include "runtime/common/reasons.h"
#include "tests/agent/support/fake_engine.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::containers {
namespace {

using fakes::FakeEngineLog;

// ---- validate.h ----

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

class FlagContext : public server::CallContext {
 public:
  bool cancelled() const override { return cancelled_.load(); }
  std::atomic<bool> cancelled_{false};
};

class EngineOpsTest : public ::testing::Test {
 protected:
  EngineOpsTest() : pods_(pod::PodEnvironment{"", false, nullptr}, fakes::FakeEngines(&log_)), ops_(&pods_, nullptr) {}

  Status CreatePod() {
    pod::PodSpec spec;
    spec.id = "pod";
    return pods_.Create(spec).status();
  }

  Status Create(const std::string& id, const std::string& json, bool pidns = false) {
    v1::CreateContainerRequest req;
    req.set_container_id(id);
    req.set_oci_spec_json(json);
    req.set_sandbox_pidns(pidns);
    return ops_.CreateContainer(req).status();
  }
  static constexpr const char* kSpec = R"({"ociVersion":"1.0.2","root":{"path":"/r"},"process":{"args":["x"],"cwd":"/"}})";

  FakeEngineLog log_;
  pod::PodSlot pods_;
  EngineOps ops_;
};

TEST_F(EngineOpsTest, WithoutASandboxContainerCallsFailWithFailedPrecondition) {
  Status st = Create("c1", kSpec);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_REASON(st, reason::kNoSandbox);
  v1::StartContainerRequest start;
  start.set_container_id("c1");
  server::AfterAnswer after;
  EXPECT_EQ(ops_.StartContainer(start, after).status().code(), Code::kFailedPrecondition);
  EXPECT_REASON(ops_.StartContainer(start, after), reason::kNoSandbox);
  FlagContext ctx;
  EXPECT_EQ(ops_.GetOOMEvent({}, ctx).status().code(), Code::kFailedPrecondition);
}

TEST_F(EngineOpsTest, BadRequestsNameTheirField) {
  ASSERT_OK(CreatePod());
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
  ASSERT_OK(CreatePod());
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
  ASSERT_OK(CreatePod());
  ASSERT_OK(Create("a", kSpec));
  ASSERT_OK(Create("b", kSpec, /*pidns=*/true));
  EXPECT_TRUE(log_.created["a"].share_namespaces_from.empty());
  EXPECT_EQ(log_.created["b"].share_namespaces_from, "a");
  EXPECT_EQ(log_.created["b"].share_types.size(), 3u);
  EXPECT_EQ(Create("a", kSpec).code(), Code::kAlreadyExists);
  v1::StartContainerRequest start;
  start.set_container_id("b");
  server::AfterAnswer after;
  EXPECT_EQ(ops_.StartContainer(start, after)->pid(), 42u);
  v1::SignalProcessRequest sig;
  sig.set_container_id("b");
  sig.set_exec_id("gone");
  sig.set_signal(9);
  EXPECT_EQ(ops_.SignalProcess(sig).code(), Code::kNotFound);
}

TEST_F(EngineOpsTest, DestroyingTheSandboxEmptiesTheEngineAndEndsCalls) {
  ASSERT_OK(CreatePod());
  ASSERT_OK(Create("a", kSpec));
  EXPECT_EQ(CreatePod().code(), Code::kAlreadyExists);  // one pod, one engine
  ASSERT_OK(pods_.Destroy());
  EXPECT_EQ(log_.remove_all, 1);
  EXPECT_EQ(Create("b", kSpec).code(), Code::kFailedPrecondition);
  ASSERT_OK(pods_.Destroy());  // idempotent
  ASSERT_OK(CreatePod());     // and a new sandbox gets a fresh engine
  EXPECT_OK(Create("a", kSpec));
}

TEST_F(EngineOpsTest, BlockingCallsReturnCancelledOnceTheCallerGivesUp) {
  ASSERT_OK(CreatePod());
  ASSERT_OK(Create("a", kSpec));
  FlagContext ctx;
  ctx.cancelled_ = true;
  v1::WaitProcessRequest wait;
  wait.set_container_id("a");
  EXPECT_EQ(ops_.WaitProcess(wait, ctx).status().code(), Code::kCancelled);
  EXPECT_EQ(ops_.GetOOMEvent({}, ctx).status().code(), Code::kCancelled);
}

TEST_F(EngineOpsTest, GetOomEventEndsWhenTheSandboxIsDestroyed) {
  ASSERT_OK(CreatePod());
  FlagContext ctx;
  std::thread destroyer([&] { ASSERT_OK(pods_.Destroy()); });
  auto event = ops_.GetOOMEvent({}, ctx);
  destroyer.join();
  // Whether the poll saw the sandbox go or started after it went.
  EXPECT_EQ(event.status().code(), Code::kFailedPrecondition) << event.status().ToString();
}

}  // namespace
}  // namespace capsule::agent::containers
