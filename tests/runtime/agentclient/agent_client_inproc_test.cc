// AgentClient against an in-process gRPC server (capsule.agent.v1.Agent
// served on one end of a socketpair, the client on the other), so both ends
// run under ASan here and a test controls exactly what the agent answers:
// replies reach the caller field for field, server codes keep their code,
// unimplemented RPCs are UNIMPLEMENTED, deadlines and Close() end calls the
// server never answers, ConnectAgent retries a not-yet-serving agent, a
// stream opened ahead (OpenAgentStream) carries a later client. The
// real capsule-agent is covered by agent_client_test.cc and tests/integration/vm.
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "capsule/agent/v1/agent.grpc.pb.h"
#include "runtime/agentclient/agent_client.h"
#include "runtime/agentclient/grpc_agent_client.h"
#include "runtime/common/grpc_status.h"
#include "tests/support/status_matchers.h"

namespace capsule::agentclient {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// The sync API has no blocking wait for a cancelled call: handlers that must
// hang poll their context at this period.
constexpr milliseconds kCancelPoll{5};

class FakeAgent final : public v1::Agent::Service {
 public:
  std::atomic<int> not_serving_checks{0};  // answer NOT_SERVING this many times first
  std::atomic<bool> hang_check{false};
  std::atomic<int> checks{0};
  std::atomic<bool> wait_cancelled{false};
  std::promise<void> wait_started;

  grpc::Status Check(grpc::ServerContext* ctx, const v1::CheckRequest*, v1::CheckResponse* resp) override {
    ++checks;
    if (hang_check) HangUntilCancelled(ctx);
    bool serving = not_serving_checks.fetch_sub(1) <= 0;
    resp->set_status(serving ? v1::CheckResponse::SERVING : v1::CheckResponse::NOT_SERVING);
    return grpc::Status::OK;
  }
  grpc::Status Version(grpc::ServerContext*, const v1::VersionRequest*, v1::VersionResponse* resp) override {
    resp->set_agent_version("inproc-9.8.7");
    resp->set_api_version(42);
    resp->set_kernel_release("6.1.0-test");
    resp->set_ready_monotonic_us(123456);
    return grpc::Status::OK;
  }
  grpc::Status ReadGuestFile(grpc::ServerContext*, const v1::ReadGuestFileRequest* req,
                             v1::ReadGuestFileResponse* resp) override {
    if (req->path() == "/named") return ToGrpcStatus(NotFound("no such file").WithReason("CONTAINER_NOT_FOUND"));
    if (req->path().starts_with("/details/")) return WithDetails(req->path().substr(9));
    if (req->path() != "/etc/hostname") return {grpc::StatusCode::NOT_FOUND, "open " + req->path() + ": ENOENT"};
    resp->set_data("guest\n");
    return grpc::Status::OK;
  }
  grpc::Status WaitProcess(grpc::ServerContext* ctx, const v1::WaitProcessRequest*,
                           v1::WaitProcessResponse*) override {
    wait_started.set_value();
    HangUntilCancelled(ctx);
    wait_cancelled = true;
    return {grpc::StatusCode::CANCELLED, "cancelled"};
  }

 private:
  // A NOT_FOUND whose details a hostile agent shaped.
  static grpc::Status WithDetails(const std::string& how) {
    google::rpc::ErrorInfo info;
    info.set_reason(how == "lower" ? "not_upper" : "CONTAINER_NOT_FOUND");
    info.set_domain(how == "domain" ? "evil.example" : std::string(kReasonDomain));
    google::rpc::Status details;
    details.set_code(5);
    details.add_details()->PackFrom(info);
    if (how == "huge") details.set_message(std::string(kMaxStatusDetailsBytes, 'x'));
    std::string bytes = how == "garbage" ? std::string("\xff\xff\xff not a proto") : details.SerializeAsString();
    return {grpc::StatusCode::NOT_FOUND, "shaped", bytes};
  }
  static void HangUntilCancelled(grpc::ServerContext* ctx) {
    while (!ctx->IsCancelled()) std::this_thread::sleep_for(kCancelPoll);
  }
};

class InProcAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.RegisterService(&agent_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now() + milliseconds(2000)); }

  // One end to the server, the other returned for a client.
  Result<UniqueFd> Connect() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus("socketpair");
    // gRPC's server side polls the fd and expects it non-blocking (as the
    // agent's accept4(SOCK_NONBLOCK) gives it); a blocking one hangs the call.
    if (::fcntl(sv[0], F_SETFL, O_NONBLOCK) != 0) {
      ::close(sv[0]);
      ::close(sv[1]);
      return ErrnoStatus("fcntl O_NONBLOCK");
    }
    grpc::AddInsecureChannelFromFd(server_.get(), sv[0]);  // takes sv[0]
    return UniqueFd(sv[1]);
  }
  AgentClientPtr Client(ClientOptions o = {}) {
    auto fd = Connect();
    EXPECT_OK(fd);
    return fd.ok() ? NewGrpcAgentClient(std::move(*fd), std::move(o)) : nullptr;
  }

  FakeAgent agent_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(InProcAgentTest, RepliesReachTheCallerFieldForField) {
  auto c = Client();
  ASSERT_TRUE(c);
  auto check = c->Check(milliseconds(5000));
  ASSERT_OK(check);
  EXPECT_EQ(check->status(), v1::CheckResponse::SERVING);
  auto v = c->Version();
  ASSERT_OK(v);
  EXPECT_EQ(v->agent_version(), "inproc-9.8.7");
  EXPECT_EQ(v->api_version(), 42u);
  EXPECT_EQ(v->kernel_release(), "6.1.0-test");
  EXPECT_EQ(v->ready_monotonic_us(), 123456u);
  v1::ReadGuestFileRequest req;
  req.set_path("/etc/hostname");
  auto f = c->ReadGuestFile(req);
  ASSERT_OK(f);
  EXPECT_EQ(f->data(), "guest\n");
}

TEST_F(InProcAgentTest, ServerErrorsKeepTheirCodeAndNameTheRpc) {
  auto c = Client();
  ASSERT_TRUE(c);
  v1::ReadGuestFileRequest req;
  req.set_path("/missing");
  auto f = c->ReadGuestFile(req);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kNotFound);
  EXPECT_EQ(f.status().message(), "agent ReadGuestFile: open /missing: ENOENT");
  // Not overridden by the fake: gRPC's own UNIMPLEMENTED, never fake data.
  auto routes = c->ListRoutes();
  ASSERT_FALSE(routes.ok());
  EXPECT_EQ(routes.status().code(), Code::kUnimplemented) << routes.status().ToString();
  EXPECT_NE(routes.status().message().find("agent ListRoutes"), std::string::npos) << routes.status().message();
}

TEST_F(InProcAgentTest, TheAgentsReasonCrossesGrpcAndShapedDetailsAreDropped) {
  auto c = Client();
  ASSERT_TRUE(c);
  v1::ReadGuestFileRequest req;
  req.set_path("/named");
  auto named = c->ReadGuestFile(req);
  EXPECT_EQ(named.status().code(), Code::kNotFound);
  EXPECT_REASON(named, "CONTAINER_NOT_FOUND");
  EXPECT_EQ(named.status().message(), "agent ReadGuestFile: no such file");
  req.set_path("/details/ok");
  EXPECT_REASON(c->ReadGuestFile(req), "CONTAINER_NOT_FOUND") << "the fake's own wrapping is well formed";
  for (const char* how : {"lower", "domain", "huge", "garbage"}) {
    req.set_path(std::string("/details/") + how);
    auto r = c->ReadGuestFile(req);
    EXPECT_EQ(r.status().code(), Code::kNotFound) << how;
    EXPECT_EQ(r.status().reason(), "") << how << ": a reason the agent shaped is dropped, the code kept";
    EXPECT_EQ(r.status().message(), "agent ReadGuestFile: shaped") << how;
  }
}

TEST_F(InProcAgentTest, ACallTheAgentNeverAnswersEndsAtItsDeadline) {
  agent_.hang_check = true;
  auto c = Client();
  ASSERT_TRUE(c);
  auto t0 = Clock::now();
  auto check = c->Check(milliseconds(200));
  ASSERT_FALSE(check.ok());
  EXPECT_EQ(check.status().code(), Code::kDeadlineExceeded) << check.status().ToString();
  EXPECT_EQ(check.status().message(), "agent Check: deadline exceeded after 200 ms");
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

TEST_F(InProcAgentTest, CloseCancelsABlockedCallAndLaterCallsAreUnavailable) {
  std::promise<void> in_flight;
  ClientOptions o;
  o.on_call_start = [&](std::string_view rpc) {
    if (rpc == "WaitProcess") in_flight.set_value();
  };
  auto c = Client(std::move(o));
  ASSERT_TRUE(c);
  auto wait = std::async(std::launch::async, [&] { return c->WaitProcess(v1::WaitProcessRequest()); });
  ASSERT_EQ(in_flight.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
  ASSERT_EQ(agent_.wait_started.get_future().wait_for(milliseconds(5000)), std::future_status::ready);
  c->Close();
  ASSERT_EQ(wait.wait_for(milliseconds(5000)), std::future_status::ready);
  auto r = wait.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCancelled) << r.status().ToString();
  auto after = c->Version();
  EXPECT_EQ(after.status().code(), Code::kUnavailable) << after.status().ToString();
}

TEST_F(InProcAgentTest, ConnectAgentRetriesRefusedDialsAndANotServingAgent) {
  agent_.not_serving_checks = 2;
  int dials = 0;
  Dialer dial = [&](milliseconds) -> Result<UniqueFd> {
    if (++dials <= 2) return Unavailable("guest not up yet");
    return Connect();
  };
  ConnectOptions o;
  o.deadline = milliseconds(10000);
  o.retry_interval = milliseconds(1);
  auto c = ConnectAgent(dial, o);
  ASSERT_OK(c);
  EXPECT_EQ(dials, 5);  // 2 refused, 2 NOT_SERVING, 1 SERVING
  EXPECT_EQ(agent_.checks.load(), 3);
  EXPECT_TRUE((*c)->Version().ok());
}

TEST_F(InProcAgentTest, ConnectAgentGivesUpWhenEveryAttemptStalls) {
  agent_.hang_check = true;
  int dials = 0;
  Dialer dial = [&](milliseconds) -> Result<UniqueFd> {
    ++dials;
    return Connect();
  };
  ConnectOptions o;
  o.deadline = milliseconds(600);
  o.attempt_timeout = milliseconds(150);
  auto t0 = Clock::now();
  auto c = ConnectAgent(dial, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kDeadlineExceeded) << c.status().ToString();
  EXPECT_NE(c.status().message().find("within 600 ms"), std::string::npos) << c.status().message();
  // A stalled stream is given up per attempt, not after the whole deadline.
  EXPECT_GE(dials, 3);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

// The caller no longer wants the VM (containerd gave up on the pod): the
// wait for a guest that is not up yet ends at once, CANCELLED, not at the
// boot deadline.
TEST_F(InProcAgentTest, ConnectAgentStopsAtOnceWhenCancelled) {
  UniqueFd cancel(::eventfd(0, EFD_CLOEXEC));
  ASSERT_TRUE(cancel);
  std::atomic<int> dials{0};
  Dialer dial = [&](milliseconds) -> Result<UniqueFd> {
    if (++dials == 3) {
      uint64_t one = 1;
      EXPECT_EQ(::write(cancel.get(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
    }
    return Unavailable("guest not up yet");
  };
  ConnectOptions o;
  o.deadline = milliseconds(30000);
  o.retry_interval = milliseconds(50);
  o.cancel_fd = cancel.get();
  auto t0 = Clock::now();
  auto c = ConnectAgent(dial, o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kCancelled) << c.status().ToString();
  EXPECT_NE(c.status().message().find("cancelled after 3 attempt(s)"), std::string::npos) << c.status().message();
  EXPECT_EQ(dials.load(), 3);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

// The pool's ahead-of-claim stream: opened here, used by a client made
// later (in the shim, another process): the agent's settings wait in the
// socket, and the client's first call works on it.
TEST_F(InProcAgentTest, AStreamOpenedAheadCarriesALaterClientsFirstCall) {
  auto stream = OpenAgentStream([&](milliseconds) { return Connect(); }, "", milliseconds(5000));
  ASSERT_OK(stream);
  char byte;
  EXPECT_EQ(::recv(stream->get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT), 1) << "the agent's first bytes stay queued";
  EXPECT_EQ(agent_.checks.load(), 0);
  ConnectTimings timings;
  ConnectOptions o;
  o.timings = &timings;
  auto c = ConnectAgentOver(std::move(*stream), o);
  ASSERT_OK(c);
  EXPECT_EQ(agent_.checks.load(), 1);
  EXPECT_GT(timings.check_ms, 0);
  EXPECT_EQ(timings.dial_ms, 0);
  auto v = (*c)->Version();
  ASSERT_OK(v);
  EXPECT_EQ(v->agent_version(), "inproc-9.8.7");
}

TEST_F(InProcAgentTest, AStreamWhoseAgentSaysNothingOrHangsUpIsNotOpened) {
  // A peer that never speaks: the wait ends at its bound.
  int silent[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, silent), 0);
  UniqueFd keep(silent[0]);
  auto t0 = Clock::now();
  auto quiet = OpenAgentStream([&](milliseconds) { return Result<UniqueFd>(UniqueFd(silent[1])); }, "",
                               milliseconds(150));
  ASSERT_FALSE(quiet.ok());
  EXPECT_EQ(quiet.status().code(), Code::kDeadlineExceeded) << quiet.status().ToString();
  EXPECT_GE(Clock::now() - t0, milliseconds(150));
  // A peer that hangs up at once.
  int gone[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gone), 0);
  ::close(gone[0]);
  auto closed = OpenAgentStream([&](milliseconds) { return Result<UniqueFd>(UniqueFd(gone[1])); }, "",
                                milliseconds(5000));
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.status().code(), Code::kUnavailable) << closed.status().ToString();
  // A dial that fails keeps its error.
  auto refused = OpenAgentStream([](milliseconds) -> Result<UniqueFd> { return Unavailable("guest not up yet"); }, "",
                                 milliseconds(5000));
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_NE(refused.status().message().find("guest not up yet"), std::string::npos) << refused.status().message();
}

// A handed-over stream whose agent no longer answers fails its one Check
// within attempt_timeout (the caller then dials afresh), not at the call
// deadline.
TEST_F(InProcAgentTest, AClientOverAStreamWhoseCheckHangsFailsWithinItsAttemptTime) {
  agent_.hang_check = true;
  auto stream = OpenAgentStream([&](milliseconds) { return Connect(); }, "", milliseconds(5000));
  ASSERT_OK(stream);
  ConnectOptions o;
  o.attempt_timeout = milliseconds(200);
  auto t0 = Clock::now();
  auto c = ConnectAgentOver(std::move(*stream), o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kDeadlineExceeded) << c.status().ToString();
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

}  // namespace
}  // namespace capsule::agentclient
