// AgentClient: typed, deadline-bounded calls to capsule-agent
// (capsule.agent.v1.Agent) over one gRPC channel made from a connected vsock
// stream. The interface uses protobuf messages only, so including it does not
// pull gRPC into the caller; the gRPC implementation lives in grpc_agent_client.cc.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "capsule/agent/v1/agent.pb.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agentclient {

namespace v1 = ::capsule::agent::v1;

// Deadline of calls that do not block on the guest's processes (the
// shim takes it from runtime.agent_timeout_ms). A call that runs out of it
// fails with DEADLINE_EXCEEDED: "agent <Rpc>: deadline exceeded after N ms".
inline constexpr std::chrono::milliseconds kDefaultCallTimeout{30000};

class AgentClient {
 public:
  virtual ~AgentClient() = default;

  virtual Result<v1::CheckResponse> Check(std::chrono::milliseconds timeout) = 0;
  virtual Result<v1::VersionResponse> Version() = 0;
  // A pool VM's rehearsal of a container's start (agent.proto Rehearse).
  // Peers that cannot rehearse answer UNIMPLEMENTED.
  virtual Result<v1::RehearseResponse> Rehearse(const v1::RehearseRequest& /*req*/,
                                                std::chrono::milliseconds /*timeout*/) {
    return Unimplemented("agent client: Rehearse is not implemented here");
  }
  virtual Status SetGuestTime(const v1::SetGuestTimeRequest& req) = 0;
  virtual Result<v1::AddRandomnessResponse> AddRandomness(const v1::AddRandomnessRequest& req) = 0;

  virtual Status CreateSandbox(const v1::CreateSandboxRequest& req) = 0;
  virtual Result<v1::SetupSandboxResponse> SetupSandbox(const v1::SetupSandboxRequest& req) = 0;
  // With power_off the agent may drop the connection before or after
  // replying; both count as success.
  virtual Status DestroySandbox(const v1::DestroySandboxRequest& req) = 0;

  virtual Result<v1::CreateContainerResponse> CreateContainer(const v1::CreateContainerRequest& req) = 0;
  virtual Result<v1::StartContainerResponse> StartContainer(const v1::StartContainerRequest& req) = 0;
  virtual Status RemoveContainer(const v1::RemoveContainerRequest& req) = 0;
  virtual Result<v1::ExecProcessResponse> ExecProcess(const v1::ExecProcessRequest& req) = 0;
  // Operators' debug access: a process in the guest outside the containers,
  // then addressed with container_id "" (agent.proto).
  virtual Result<v1::ExecProcessResponse> ExecGuestProcess(const v1::ExecGuestProcessRequest& req) = 0;
  virtual Status SignalProcess(const v1::SignalProcessRequest& req) = 0;
  virtual Status RemoveProcess(const v1::RemoveProcessRequest& req) = 0;
  virtual Result<v1::ListProcessesResponse> ListProcesses(const v1::ListProcessesRequest& req) = 0;
  virtual Status UpdateContainer(const v1::UpdateContainerRequest& req) = 0;
  virtual Result<v1::StatsContainerResponse> StatsContainer(const v1::StatsContainerRequest& req) = 0;
  virtual Status PauseContainer(const v1::PauseContainerRequest& req) = 0;
  virtual Status ResumeContainer(const v1::ResumeContainerRequest& req) = 0;

  // Blocking calls: no deadline unless given; Close() cancels them (CANCELLED).
  virtual Result<v1::WaitProcessResponse> WaitProcess(
      const v1::WaitProcessRequest& req, std::optional<std::chrono::milliseconds> timeout = std::nullopt) = 0;
  virtual Result<v1::ReadStreamResponse> ReadStdout(const v1::ReadStreamRequest& req) = 0;
  virtual Result<v1::ReadStreamResponse> ReadStderr(const v1::ReadStreamRequest& req) = 0;
  virtual Result<v1::OOMEvent> GetOOMEvent(std::chrono::milliseconds timeout) = 0;

  virtual Result<v1::WriteStreamResponse> WriteStdin(const v1::WriteStreamRequest& req) = 0;
  virtual Status CloseStdin(const v1::CloseStdinRequest& req) = 0;
  virtual Status TtyWinResize(const v1::TtyWinResizeRequest& req) = 0;

  virtual Result<v1::Interface> UpdateInterface(const v1::UpdateInterfaceRequest& req) = 0;
  virtual Result<v1::Routes> UpdateRoutes(const v1::UpdateRoutesRequest& req) = 0;
  virtual Result<v1::Interfaces> ListInterfaces() = 0;
  virtual Result<v1::Routes> ListRoutes() = 0;

  virtual Result<v1::ReadGuestFileResponse> ReadGuestFile(const v1::ReadGuestFileRequest& req) = 0;

  // Cancels every call in flight and closes the channel; later calls fail
  // with UNAVAILABLE.
  virtual void Close() = 0;
};
using AgentClientPtr = std::unique_ptr<AgentClient>;

// One attempt at a connected stream to the agent's port (vsock hybrid dial,
// AF_VSOCK, or a unix socket in tests). UNAVAILABLE means "try again".
using Dialer = std::function<Result<UniqueFd>(std::chrono::milliseconds attempt_timeout)>;

// Where a successful attempt's time went (ms), for the callers' timing lines.
struct ConnectTimings {
  double dial_ms = 0;   // the dialer: the stream to the guest port
  double token_ms = 0;  // the AUTH handshake (0 without a token)
  double check_ms = 0;  // the first gRPC call, Check
};

struct ConnectOptions {
  // Overall deadline: a booting guest is dialled and checked until then.
  std::chrono::milliseconds deadline{60000};
  // Pause between attempts while the guest is not answering yet.
  std::chrono::milliseconds retry_interval{20};
  std::chrono::milliseconds default_call_timeout = kDefaultCallTimeout;
  // SignalProcess and TtyWinResize, which only poke the guest: a caller that
  // must stay responsive to its user (an interactive exec) bounds them
  // shorter, so a stalling agent cannot hold its loop. Default: the above.
  std::optional<std::chrono::milliseconds> signal_call_timeout;
  // Bound of one attempt (dial + Check), so a stalled stream is retried on a
  // fresh one instead of eating the whole deadline.
  std::chrono::milliseconds attempt_timeout{5000};
  // When >= 0: give up with ABORTED as soon as this fd is readable (e.g. the
  // VMM's exit fd, so a dead VM ends the wait at once). Not owned.
  int abort_fd = -1;
  // When >= 0: give up with CANCELLED as soon as this fd is readable (the
  // caller no longer wants the VM, e.g. containerd gave up on its Create).
  // Not owned.
  int cancel_fd = -1;
  // The VM's agent token (agent_auth.h), proved on each stream before gRPC;
  // empty: none (an agent run by hand or in a test without one). A token
  // the agent refuses ends the wait at once with PERMISSION_DENIED.
  std::string token;
  // Passed to the client (grpc_agent_client.h ClientOptions::on_call_end).
  std::function<void(std::string_view rpc, double seconds, bool ok)> on_call_end;
  // When set: filled with the successful attempt's timings. Not owned.
  ConnectTimings* timings = nullptr;
};

// A stream a gRPC client can start on at once: dialled, the token (when
// not empty) proved, and the agent's first bytes (its HTTP/2 settings)
// arrived, which it sends once its side of the connection is set up. That
// set-up is most of a fresh stream's first call under TCG (~16 ms), so
// the pool opens one per ready VM before any claim and hands it to the
// claimant. Nothing is read from the stream: the settings stay queued for
// the client. UNAVAILABLE when the agent closes it first.
Result<UniqueFd> OpenAgentStream(const Dialer& dial, const std::string& token, std::chrono::milliseconds timeout);

// A client over a stream OpenAgentStream made (here or in another
// process), checked once (Check answers SERVING within
// options.attempt_timeout). No retry: a caller whose stream turned out
// dead dials afresh with ConnectAgent. Only the call options are used.
Result<AgentClientPtr> ConnectAgentOver(UniqueFd stream, const ConnectOptions& options);

// Dials until the agent answers Check (SERVING) or the deadline passes
// (DEADLINE_EXCEEDED naming the last error). Dial errors other than
// UNAVAILABLE / DEADLINE_EXCEEDED end the wait at once, and so do the
// abort fd (ABORTED) and the cancel fd (CANCELLED) between attempts.
Result<AgentClientPtr> ConnectAgent(const Dialer& dial, const ConnectOptions& options);

}  // namespace capsule::agentclient
