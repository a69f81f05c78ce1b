// Runs the real capsule-agent binary as a normal process (--no-init, private
// namespaces) listening on a unix socket in a temp dir, and gives tests a
// gRPC stub to it. The agent reports readiness through --ready-fd, so no test
// polls for the socket.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capsule/agent/v1/agent.grpc.pb.h"
#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"

namespace capsule::agent::testing {

class AgentUnderTest {
 public:
  // Starts the agent with `extra_args` after the fixture's own; check ok().
  // `binary`: another build of the agent (capsule-agent-faults); default
  // $CAPSULE_BUILD_DIR/agent/capsule-agent.
  static Result<std::unique_ptr<AgentUnderTest>> Start(const std::vector<std::string>& extra_args = {},
                                                       const std::string& binary = "");
  explicit AgentUnderTest(TempDir dir) : dir_(std::move(dir)) {}
  ~AgentUnderTest();

  v1::Agent::Stub& stub() { return *stub_; }
  const TempDir& dir() const { return dir_; }
  std::string socket_path() const { return dir_.Join("agent.sock"); }
  ChildProcess& process() { return *process_; }

  // SIGTERM and wait; returns the exit code.
  Result<int> Stop();

  // Reads a file in the agent's own mount namespace through ReadGuestFile.
  Result<std::string> ReadInAgent(const std::string& path, uint32_t max_bytes = 1024 * 1024);

 private:
  TempDir dir_;
  std::optional<ChildProcess> process_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

// Deadline for every call in tests: generous for a loaded CI machine.
std::unique_ptr<grpc::ClientContext> Ctx();

}  // namespace capsule::agent::testing
