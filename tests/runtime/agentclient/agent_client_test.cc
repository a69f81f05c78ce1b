// AgentClient over a unix socket to the real capsule-agent (--no-init): the
// calls, error mapping, deadlines, Close() cancelling a call that is really
// blocked (the agent is stopped with SIGSTOP, so nothing can answer), and
// ConnectAgent's retry loop. The vsock path is tests/integration/vm.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <optional>
#include <thread>

#include "runtime/agentclient/agent_client.h"
#include "runtime/agentclient/grpc_agent_client.h"
#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unix_stream.h"
#include "runtime/wire/agent_auth.h"
#include "runtime/wire/guest_abi.h"
#include "tests/support/status_matchers.h"

namespace capsule::agentclient {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// kill(SIGSTOP) returns before the target's threads have stopped; a call
// sent in that window would still be answered.
bool WaitUntilStopped(pid_t pid) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    bool all = true;
    DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
    if (!d) return false;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      auto stat = ReadFile("/proc/" + std::to_string(pid) + "/task/" + e->d_name + "/stat");
      if (!stat.ok()) continue;  // a thread that just ended
      auto paren = stat->rfind(')');
      if (paren == std::string::npos || paren + 2 >= stat->size() || (*stat)[paren + 2] != 'T') all = false;
    }
    ::closedir(d);
    if (all) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return false;
}

constexpr int kAgentReadyTimeoutMs = 30000;

// capsule-agent as a normal process on a unix socket in a temp dir.
class Agent {
 public:
  explicit Agent(std::string socket) : socket_(std::move(socket)) {}
  ~Agent() {
    if (process_ && !process_->reaped()) {
      (void)process_->Signal(SIGCONT);
      process_->Terminate(milliseconds(5000));
    }
  }

  Status Start(const std::vector<std::string>& extra_args = {}) {
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
    UniqueFd ready_r(ready[0]), ready_w(ready[1]);
    SpawnOptions so;
    so.argv = {CAPSULE_AGENT_BIN, "--no-init", "--listen", "unix:" + socket_, "--ready-fd",
               std::to_string(ready_w.get()), "--resolv-conf", socket_ + ".resolv"};
    so.argv.insert(so.argv.end(), extra_args.begin(), extra_args.end());
    so.stdout_fd = so.stderr_fd = STDERR_FILENO;
    so.keep_fds = {ready_w.get()};
    so.die_with_parent = true;
    ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(so));
    process_.emplace(std::move(child));
    ready_w.reset();
    pollfd p{ready_r.get(), POLLIN, 0};
    char buf[8] = {};
    if (::poll(&p, 1, kAgentReadyTimeoutMs) != 1 || ::read(ready_r.get(), buf, sizeof buf) != 6)
      return Unavailable("capsule-agent did not report ready");
    return Status::Ok();
  }
  ChildProcess& process() { return *process_; }
  const std::string& socket() const { return socket_; }

 private:
  std::string socket_;
  std::optional<ChildProcess> process_;
};

class AgentClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = TempDir::Create("agentclient");
    ASSERT_OK(d);
    dir_.emplace(std::move(*d));
    agent_.emplace(dir_->Join("agent.sock"));
  }
  void StartAgent() { ASSERT_OK(agent_->Start()); }
  Dialer UnixDialer() {
    // One try per attempt, as the Dialer contract asks: ConnectAgent retries.
    return [path = agent_->socket()](milliseconds) { return ConnectUnix(path); };
  }
  AgentClientPtr Connect(ClientOptions o = {}) {
    auto fd = ConnectUnix(agent_->socket(), {.listen_wait = milliseconds(1000)});
    EXPECT_OK(fd);
    return fd.ok() ? NewGrpcAgentClient(std::move(*fd), std::move(o)) : nullptr;
  }

  std::optional<TempDir> dir_;
  std::optional<Agent> agent_;
};

TEST_F(AgentClientTest, CheckAndVersionAnswer) {
  StartAgent();
  auto client = Connect();
  ASSERT_TRUE(client);
  auto check = client->Check(milliseconds(5000));
  ASSERT_OK(check);
  EXPECT_EQ(check->status(), v1::CheckResponse::SERVING);
  auto version = client->Version();
  ASSERT_OK(version);
  EXPECT_EQ(version->api_version(), guest_abi::kAgentApiVersion);
  EXPECT_FALSE(version->agent_version().empty());
}

TEST_F(AgentClientTest, AgentErrorsKeepTheirCodeAndNameTheRpc) {
  StartAgent();
  auto client = Connect();
  ASSERT_TRUE(client);
  // A container call before CreateSandbox: the agent's code and reason.
  v1::StartContainerRequest start;
  start.set_container_id("nope");
  auto started = client->StartContainer(start);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(started.status().message().rfind("agent StartContainer: ", 0), 0u) << started.status().message();
  EXPECT_REASON(started, reason::kNoSandbox) << "the real agent's reason crosses gRPC";
  // A request the agent rejects: the agent's own message comes through.
  v1::ReadGuestFileRequest req;
  req.set_path("relative/path");
  req.set_max_bytes(16);
  auto read = client->ReadGuestFile(req);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Code::kInvalidArgument);
  EXPECT_NE(read.status().message().find("agent ReadGuestFile: "), std::string::npos);
  EXPECT_NE(read.status().message().find("relative/path"), std::string::npos) << read.status().message();
}

// The agent's words reach logs and the operator's terminal (`exec`): what a
// guest puts in them is escaped there and cut to a bound.
TEST_F(AgentClientTest, AnAgentsErrorTextIsEscapedAndBounded) {
  StartAgent();
  auto client = Connect();
  ASSERT_TRUE(client);
  v1::ReadGuestFileRequest req;
  req.set_path("relative/\x1b[2J\rpath/" + std::string(3000, 'a'));
  req.set_max_bytes(16);
  auto read = client->ReadGuestFile(req);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), Code::kInvalidArgument);
  const std::string& m = read.status().message();
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
  EXPECT_EQ(m.find('\r'), std::string::npos) << m;
  EXPECT_NE(m.find("relative/\\x1b[2J\\x0dpath/aaa"), std::string::npos) << m;
  EXPECT_LT(m.size(), 1200u) << m;
  EXPECT_NE(m.find(" more bytes)"), std::string::npos) << m;
}

TEST_F(AgentClientTest, CallsHitTheirDeadlineWhenTheAgentStalls) {
  StartAgent();
  ClientOptions o;
  o.default_call_timeout = milliseconds(300);
  o.signal_call_timeout = milliseconds(150);
  auto client = Connect(o);
  ASSERT_TRUE(client);
  ASSERT_OK(client->Check(milliseconds(5000)));  // the stream is up
  ASSERT_OK(agent_->process().Signal(SIGSTOP));
  ASSERT_TRUE(WaitUntilStopped(agent_->process().pid()));

  auto t0 = Clock::now();
  auto check = client->Check(milliseconds(200));
  EXPECT_EQ(check.status().code(), Code::kDeadlineExceeded) << check.status().ToString();
  EXPECT_NE(check.status().message().find("agent Check"), std::string::npos);
  EXPECT_NE(check.status().message().find("200 ms"), std::string::npos) << check.status().message();
  EXPECT_GE(Clock::now() - t0, milliseconds(200));

  auto version = client->Version();  // no timeout given: the client's default
  EXPECT_EQ(version.status().code(), Code::kDeadlineExceeded) << version.status().ToString();
  EXPECT_NE(version.status().message().find("300 ms"), std::string::npos) << version.status().message();

  // A signal or a window size: the shorter bound an interactive caller set.
  v1::SignalProcessRequest sig;
  sig.set_exec_id("x");
  sig.set_signal(SIGINT);
  Status signalled = client->SignalProcess(sig);
  EXPECT_EQ(signalled.code(), Code::kDeadlineExceeded) << signalled.ToString();
  EXPECT_NE(signalled.message().find("150 ms"), std::string::npos) << signalled.message();
  v1::TtyWinResizeRequest resize;
  resize.set_exec_id("x");
  Status resized = client->TtyWinResize(resize);
  EXPECT_NE(resized.message().find("150 ms"), std::string::npos) << resized.message();

  ASSERT_OK(agent_->process().Signal(SIGCONT));
  auto again = client->Check(milliseconds(5000));
  EXPECT_OK(again);
}

TEST_F(AgentClientTest, CloseCancelsACallBlockedInTheAgent) {
  StartAgent();
  std::promise<void> started;
  ClientOptions o;
  o.on_call_start = [&](std::string_view rpc) {
    if (rpc == "WaitProcess") started.set_value();
  };
  auto client = Connect(o);
  ASSERT_TRUE(client);
  ASSERT_OK(client->Check(milliseconds(5000)));
  ASSERT_OK(agent_->process().Signal(SIGSTOP));
  ASSERT_TRUE(WaitUntilStopped(agent_->process().pid()));

  // WaitProcess has no deadline unless given one: only Close() ends it.
  auto waiting = std::async(std::launch::async, [&] { return client->WaitProcess(v1::WaitProcessRequest()); });
  started.get_future().wait();
  EXPECT_EQ(waiting.wait_for(milliseconds(300)), std::future_status::timeout) << "the call should be blocked";
  auto t0 = Clock::now();
  client->Close();
  ASSERT_EQ(waiting.wait_for(milliseconds(5000)), std::future_status::ready);
  auto r = waiting.get();
  EXPECT_EQ(r.status().code(), Code::kCancelled) << r.status().ToString();
  EXPECT_NE(r.status().message().find("agent WaitProcess"), std::string::npos);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));

  auto after = client->Check(milliseconds(1000));
  EXPECT_EQ(after.status().code(), Code::kUnavailable) << after.status().ToString();
  EXPECT_NE(after.status().message().find("closed"), std::string::npos);
  client->Close();  // idempotent
}

TEST_F(AgentClientTest, DestroySandboxWithPowerOffEndsTheAgent) {
  StartAgent();
  auto client = Connect();
  ASSERT_TRUE(client);
  v1::DestroySandboxRequest req;
  req.set_power_off(true);
  Status st = client->DestroySandbox(req);
  EXPECT_OK(st);
  auto status = agent_->process().Wait(milliseconds(20000));
  ASSERT_OK(status);
  EXPECT_EQ(ExitCode(*status), 0);
  // The stream went with the agent; the channel cannot reconnect.
  EXPECT_EQ(client->Check(milliseconds(2000)).status().code(), Code::kUnavailable);
}

TEST_F(AgentClientTest, ConnectAgentRetriesUntilTheAgentListens) {
  std::atomic<int> attempts{0};
  Dialer dial = [&](milliseconds) -> Result<UniqueFd> {
    auto fd = ConnectUnix(agent_->socket());
    // The agent starts only after a dial has failed, so success needs a retry.
    if (++attempts == 1) {
      EXPECT_EQ(fd.status().code(), Code::kUnavailable) << fd.status().ToString();
      Status st = agent_->Start();
      EXPECT_OK(st);
    }
    return fd;
  };
  ConnectOptions o;
  o.deadline = milliseconds(30000);
  auto client = ConnectAgent(dial, o);
  ASSERT_OK(client);
  EXPECT_GE(attempts.load(), 2);
  EXPECT_TRUE((*client)->Version().ok());
}

TEST_F(AgentClientTest, ConnectAgentTimesOutNamingTheLastError) {
  ConnectOptions o;
  o.deadline = milliseconds(300);
  auto t0 = Clock::now();
  auto client = ConnectAgent(UnixDialer(), o);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(client.status().message().find("did not answer Check within 300 ms"), std::string::npos)
      << client.status().message();
  EXPECT_NE(client.status().message().find(agent_->socket()), std::string::npos) << client.status().message();
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

TEST_F(AgentClientTest, ConnectAgentStopsAtOnceWhenAborted) {
  UniqueFd abort(::eventfd(0, EFD_CLOEXEC));
  ASSERT_TRUE(abort);
  std::atomic<int> attempts{0};
  Dialer dial = [&](milliseconds) {
    if (++attempts == 3) {
      uint64_t one = 1;
      EXPECT_EQ(::write(abort.get(), &one, sizeof one), 8);
    }
    return ConnectUnix(agent_->socket());
  };
  ConnectOptions o;
  o.deadline = milliseconds(60000);
  o.abort_fd = abort.get();
  auto t0 = Clock::now();
  auto client = ConnectAgent(dial, o);
  EXPECT_EQ(client.status().code(), Code::kAborted) << client.status().ToString();
  EXPECT_EQ(attempts.load(), 3);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

TEST_F(AgentClientTest, ConnectAgentGivesUpAtOnceOnAnErrorThatRetryingCannotFix) {
  std::atomic<int> attempts{0};
  Dialer dial = [&](milliseconds) -> Result<UniqueFd> {
    ++attempts;
    return Status(Code::kPermissionDenied, "vsock socket: EACCES");
  };
  auto client = ConnectAgent(dial, ConnectOptions{});
  EXPECT_EQ(client.status().code(), Code::kPermissionDenied);
  EXPECT_NE(client.status().message().find("EACCES"), std::string::npos);
  EXPECT_EQ(attempts.load(), 1);
}

// The agent token (agent_auth.h) between ConnectAgent and the real agent:
// its own token opens the agent, another is refused at once by name, a
// client that skips the handshake never reaches gRPC, silent connections
// (more than the agent hears at once) do not keep the host out, and a token that changes (a clone's, after restore) is
// read again for the next connection.
TEST_F(AgentClientTest, OnlyAConnectionThatProvesTheAgentTokenReachesGrpc) {
  auto good = agent_auth::NewToken();
  ASSERT_OK(good);
  auto other = agent_auth::NewToken();
  ASSERT_OK(other);
  const std::string token_file = dir_->Join("token");
  ASSERT_OK(WriteFileAtomic(token_file, *good + "\n"));
  ASSERT_OK(agent_->Start({"--auth-token-file", token_file}));

  ConnectOptions o;
  o.deadline = milliseconds(10000);
  o.token = *good;
  auto client = ConnectAgent(UnixDialer(), o);
  ASSERT_OK(client);
  EXPECT_TRUE((*client)->Version().ok());

  o.token = *other;
  auto t0 = Clock::now();
  auto refused = ConnectAgent(UnixDialer(), o);
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied) << refused.status().ToString();
  EXPECT_REASON(refused, reason::kAgentTokenRefused);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000)) << "a refused token is not retried";

  // gRPC straight away: the HTTP/2 preface is not an AUTH line.
  auto bare = Connect();
  ASSERT_TRUE(bare);
  auto check = bare->Check(milliseconds(3000));
  EXPECT_FALSE(check.ok()) << "a client without the token got an answer";

  // Silent dialers, more than the handshakes the gate runs at once.
  std::vector<UniqueFd> silent;
  for (int i = 0; i < 20; ++i) {
    auto fd = ConnectUnix(agent_->socket(), {.listen_wait = milliseconds(1000)});
    ASSERT_OK(fd);
    silent.push_back(std::move(*fd));
  }
  o.token = *good;
  auto despite = ConnectAgent(UnixDialer(), o);
  ASSERT_OK(despite);
  EXPECT_TRUE((*despite)->Version().ok());
  silent.clear();

  // A new token (a template clone's after its restore): the first peer
  // that names it makes the agent read it again; the old one is refused
  // from then on.
  ASSERT_OK(WriteFileAtomic(token_file, *other));
  o.token = *other;
  auto renewed = ConnectAgent(UnixDialer(), o);
  ASSERT_OK(renewed);
  o.token = *good;
  EXPECT_EQ(ConnectAgent(UnixDialer(), o).status().code(), Code::kPermissionDenied);
  EXPECT_TRUE((*client)->Version().ok()) << "a connection made before keeps working";
}

}  // namespace
}  // namespace capsule::agentclient
