// Spawns capsule-agent from the build tree ($CAPSULE_BUILD_DIR/agent).
#include "tests/agent/server/agent_fixture.h"
#include "runtime/common/grpc_status.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

namespace capsule::agent::testing {
namespace {

constexpr int kReadyTimeoutMs = 30000;
constexpr auto kCallDeadline = std::chrono::seconds(20);

std::string AgentBinary() {
  const char* build = std::getenv("CAPSULE_BUILD_DIR");
  return std::string(build ? build : ".") + "/agent/capsule-agent";
}

}  // namespace

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  return ctx;
}

Result<std::unique_ptr<AgentUnderTest>> AgentUnderTest::Start(const std::vector<std::string>& extra_args,
                                                              const std::string& binary) {
  ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("agent-test"));
  auto a = std::make_unique<AgentUnderTest>(std::move(dir));
  RETURN_IF_ERROR(MkdirAll(a->dir_.Join("modules")));
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  UniqueFd ready_read(ready[0]), ready_write(ready[1]);
  SpawnOptions so;
  so.argv = {binary.empty() ? AgentBinary() : binary, "--no-init", "--listen", "unix:" + a->socket_path(), "--resolv-conf",
             a->dir_.Join("etc/resolv.conf"), "--modules-dir", a->dir_.Join("modules"), "--ready-fd",
             std::to_string(ready_write.get()), "--log-level", "debug"};
  so.argv.insert(so.argv.end(), extra_args.begin(), extra_args.end());
  so.stdout_fd = so.stderr_fd = STDERR_FILENO;  // agent log in the test output
  so.keep_fds = {ready_write.get()};
  so.die_with_parent = true;
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(so));
  a->process_.emplace(std::move(child));
  ready_write.reset();
  pollfd p{ready_read.get(), POLLIN, 0};
  char buf[8] = {};
  if (::poll(&p, 1, kReadyTimeoutMs) != 1 || ::read(ready_read.get(), buf, sizeof buf) != 6) {
    return Unavailable("capsule-agent did not report ready (see its log above)");
  }
  a->channel_ = grpc::CreateChannel("unix:" + a->socket_path(), grpc::InsecureChannelCredentials());
  a->stub_ = v1::Agent::NewStub(a->channel_);
  return a;
}

AgentUnderTest::~AgentUnderTest() {
  if (process_ && !process_->reaped()) (void)Stop();
}

Result<int> AgentUnderTest::Stop() {
  stub_.reset();
  channel_.reset();
  if (process_->reaped()) return Internal("agent already reaped");
  RETURN_IF_ERROR(process_->Signal(SIGTERM));
  ASSIGN_OR_RETURN(int status, process_->Wait(std::chrono::milliseconds(20000)));
  return ExitCode(status);
}

Result<std::string> AgentUnderTest::ReadInAgent(const std::string& path, uint32_t max_bytes) {
  v1::ReadGuestFileRequest req;
  req.set_path(path);
  req.set_max_bytes(max_bytes);
  v1::ReadGuestFileResponse resp;
  grpc::Status st = stub_->ReadGuestFile(Ctx().get(), req, &resp);
  if (!st.ok()) return FromGrpcStatus(st, st.error_message());
  return resp.data();
}

}  // namespace capsule::agent::testing
