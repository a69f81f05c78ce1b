// Test-side helpers over the agent's gRPC stub: one call per helper,
// capsule::Status results (so failures print code and message), a fresh
// deadline for every call, and small composites (read a stream to eof,
// run a container to completion).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "tests/agent/containers/agent_endpoint.h"

namespace capsule::agent::testing {

// Deadline of calls that should not block; waits get kBlockingDeadline.
inline constexpr std::chrono::seconds kCallDeadline{30};
inline constexpr std::chrono::seconds kBlockingDeadline{60};

Status FromGrpc(const grpc::Status& st);

class ApiClient {
 public:
  explicit ApiClient(AgentEndpoint& endpoint) : ep_(endpoint), stub_(endpoint.stub()) {}

  v1::Agent::Stub& stub() { return stub_; }
  AgentEndpoint& endpoint() { return ep_; }

  Status CreateSandbox(const std::string& id, bool sandbox_pidns = false);
  Status DestroySandbox();
  // SetupSandbox (fresh clock and RNG) whose sandbox container `id` is the
  // agent's pod holder; returns the agent's answer (the holder's pid, the
  // agent's timings).
  Result<v1::SetupSandboxResponse> SetupSandboxWithHolder(const std::string& id, const std::string& hostname);
  Status Create(const std::string& id, const nlohmann::json& spec, bool sandbox_pidns = false,
                const std::vector<v1::Storage>& storages = {}, bool stdin_closed = false);
  Status CreateRaw(const std::string& id, const std::string& spec_json);
  // Create, returning the agent's answer (its timings).
  Result<v1::CreateContainerResponse> CreateAnswered(const std::string& id, const nlohmann::json& spec,
                                                     bool sandbox_pidns = false,
                                                     const std::vector<v1::Storage>& storages = {},
                                                     bool stdin_closed = false);
  Result<uint32_t> Start(const std::string& id);
  Status Remove(const std::string& id);
  Result<uint32_t> Exec(const std::string& id, const std::string& exec_id, const nlohmann::json& process,
                        bool stdin_closed = false);
  // A process in the guest outside the containers (ExecGuestProcess); the
  // other helpers reach it with container id "". With a tools container it
  // runs as that container's init unless `as_guest_root`.
  Result<uint32_t> ExecGuest(const std::string& exec_id, const nlohmann::json& process,
                             const std::string& tools_container = "", bool as_guest_root = false);
  Status Signal(const std::string& id, const std::string& exec_id, uint32_t signal, bool all = false);
  Result<v1::WaitProcessResponse> Wait(const std::string& id, const std::string& exec_id = "",
                                       std::chrono::milliseconds deadline = kBlockingDeadline);
  Status RemoveProcess(const std::string& id, const std::string& exec_id);
  Result<v1::ReadStreamResponse> Read(const std::string& id, const std::string& exec_id, bool stderr_stream,
                                      uint32_t len = 0);
  // Reads until eof, or until the output contains `until` when given.
  Result<std::string> ReadAll(const std::string& id, const std::string& exec_id = "", bool stderr_stream = false,
                              const std::string& until = "");
  Result<uint32_t> Write(const std::string& id, const std::string& exec_id, const std::string& data);
  Status CloseStdin(const std::string& id, const std::string& exec_id = "");
  Status Resize(const std::string& id, const std::string& exec_id, uint32_t row, uint32_t column);
  Result<v1::ListProcessesResponse> List(const std::string& id);
  Result<v1::StatsContainerResponse> Stats(const std::string& id);
  Status Update(const std::string& id, const nlohmann::json& resources);
  Status Pause(const std::string& id);
  Status Resume(const std::string& id);
  Result<std::string> ReadFile(const std::string& path);

  // The spec of a container running `args` in the endpoint's rootfs.
  nlohmann::json Spec(const std::vector<std::string>& args) const;
  // The OCI Process of `spec`, for ExecProcess.
  static nlohmann::json Process(const std::vector<std::string>& args, bool terminal = false);

 private:
  AgentEndpoint& ep_;
  v1::Agent::Stub& stub_;
};

// The agent's mount points (mountinfo field 5), sorted.
std::vector<std::string> MountPoints(const std::string& mountinfo);

}  // namespace capsule::agent::testing
