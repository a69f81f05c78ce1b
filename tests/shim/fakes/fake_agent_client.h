// FakeAgentClient: an in-memory capsule-agent for the shim's service-layer
// unit tests. It models containers and processes as the real agent's
// contract describes them (agent.proto): blocking waits and reads that end
// at exit or Close(), NOT_FOUND for signalling an exited process, output
// readable before eof. Tests script processes (output, exit codes), inject
// failures per method and read the call log.
#pragma once

#include <functional>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/agentclient/agent_client.h"

namespace capsule::testing {

namespace av1 = ::capsule::agent::v1;

class FakeAgentClient : public agentclient::AgentClient {
 public:
  // What a process does when started: print, then exit with `exit_code`
  // (or run until signalled when unset).
  struct Script {
    std::string out;
    std::string err;
    std::optional<int> exit_code;
  };

  // --- test controls ---
  // The next call of `method` fails with `status`.
  void FailNext(const std::string& method, Status status);
  // Script for the init of `container_id` (when it starts), or an exec.
  void SetScript(const std::string& container_id, const std::string& exec_id, Script script);
  // Makes a running process exit now with `code` after emitting `out`.
  void Exit(const std::string& container_id, const std::string& exec_id, int code, const std::string& out = "");
  // Exits it with 137 as the guest's OOM killer does: WaitProcess reports
  // oom_killed, and no GetOOMEvent is queued (the watcher missed it).
  void ExitOomKilled(const std::string& container_id, const std::string& exec_id);
  void InjectOom(const std::string& container_id);
  size_t pending_ooms() const;
  // A lying guest: reads answer with all the buffered output, more than asked.
  void set_oversized_reads(bool on);
  // The next CreateContainer runs `on_enter`, then hangs (a guest that does
  // not answer; other calls go on) until Close() cuts it: CANCELLED, as the
  // shim's Revoke cuts a real call.
  void HangNextCreateContainer(std::function<void()> on_enter);
  // The next call of `method` (CreateSandbox, SetGuestTime, CreateContainer,
  // StartContainer, PauseContainer, StatsContainer, CloseStdin, ReadStdout,
  // ReadStderr) runs `on_enter`, then waits, other calls going on, until
  // Release(method) lets it proceed as usual, or until Close() cuts it
  // (CANCELLED): a slow guest.
  void HoldNext(const std::string& method, std::function<void()> on_enter = {});
  void Release(const std::string& method);
  // The next call of `method` (as above) answers, after `after`, what the
  // real client answers when its deadline passes: DEADLINE_EXCEEDED "agent
  // <method>: deadline exceeded after N ms" (CANCELLED if closed first).
  void TimeOutNext(const std::string& method, std::chrono::milliseconds after);
  std::vector<std::string> calls() const;
  bool called(const std::string& method) const;
  std::string stdin_of(const std::string& container_id, const std::string& exec_id) const;
  bool stdin_closed(const std::string& container_id, const std::string& exec_id) const;
  av1::CreateSandboxRequest sandbox() const;
  std::optional<av1::CreateContainerRequest> created(const std::string& container_id) const;
  std::string last_update() const;
  av1::SetGuestTimeRequest guest_time() const;  // the last SetGuestTime
  uint64_t reseeds() const;                      // AddRandomness calls
  bool closed() const;
  size_t container_count() const;

  // --- AgentClient ---
  Result<av1::CheckResponse> Check(std::chrono::milliseconds timeout) override;
  Result<av1::VersionResponse> Version() override;
  Status SetGuestTime(const av1::SetGuestTimeRequest& req) override;
  Result<av1::AddRandomnessResponse> AddRandomness(const av1::AddRandomnessRequest& req) override;
  Status CreateSandbox(const av1::CreateSandboxRequest& req) override;
  // Runs the steps as the agent does, through the fake's own methods above
  // (each recorded, and held or failed as they are), after "SetupSandbox".
  Result<av1::SetupSandboxResponse> SetupSandbox(const av1::SetupSandboxRequest& req) override;
  Status DestroySandbox(const av1::DestroySandboxRequest& req) override;
  Result<av1::CreateContainerResponse> CreateContainer(const av1::CreateContainerRequest& req) override;
  Result<av1::StartContainerResponse> StartContainer(const av1::StartContainerRequest& req) override;
  Status RemoveContainer(const av1::RemoveContainerRequest& req) override;
  Result<av1::ExecProcessResponse> ExecProcess(const av1::ExecProcessRequest& req) override;
  Result<av1::ExecProcessResponse> ExecGuestProcess(const av1::ExecGuestProcessRequest& req) override;
  Status SignalProcess(const av1::SignalProcessRequest& req) override;
  Status RemoveProcess(const av1::RemoveProcessRequest& req) override;
  Result<av1::ListProcessesResponse> ListProcesses(const av1::ListProcessesRequest& req) override;
  Status UpdateContainer(const av1::UpdateContainerRequest& req) override;
  Result<av1::StatsContainerResponse> StatsContainer(const av1::StatsContainerRequest& req) override;
  Status PauseContainer(const av1::PauseContainerRequest& req) override;
  Status ResumeContainer(const av1::ResumeContainerRequest& req) override;
  Result<av1::WaitProcessResponse> WaitProcess(const av1::WaitProcessRequest& req,
                                              std::optional<std::chrono::milliseconds> timeout) override;
  Result<av1::ReadStreamResponse> ReadStdout(const av1::ReadStreamRequest& req) override;
  Result<av1::ReadStreamResponse> ReadStderr(const av1::ReadStreamRequest& req) override;
  Result<av1::OOMEvent> GetOOMEvent(std::chrono::milliseconds timeout) override;
  Result<av1::WriteStreamResponse> WriteStdin(const av1::WriteStreamRequest& req) override;
  Status CloseStdin(const av1::CloseStdinRequest& req) override;
  Status TtyWinResize(const av1::TtyWinResizeRequest& req) override;
  Result<av1::Interface> UpdateInterface(const av1::UpdateInterfaceRequest& req) override;
  Result<av1::Routes> UpdateRoutes(const av1::UpdateRoutesRequest& req) override;
  Result<av1::Interfaces> ListInterfaces() override;
  Result<av1::Routes> ListRoutes() override;
  Result<av1::ReadGuestFileResponse> ReadGuestFile(const av1::ReadGuestFileRequest& req) override;
  void Close() override;

 private:
  struct Proc {
    uint32_t pid = 0;
    bool started = false;
    bool exited = false;
    int status = 0;
    bool oom_killed = false;
    std::string out, err, in;
    bool in_closed = false;
    bool removed = false;  // never erased: blocked callers keep their pointer
  };
  struct Ctr {
    av1::CreateContainerRequest create;
    std::map<std::string, Proc> procs;  // "" = init
    bool removed = false;
  };
  // Records the call; returns the injected failure, or UNAVAILABLE once closed.
  Status Enter(const std::string& method);
  // Before the lock of a method: its hold or its time-out, if one is set.
  Status Gate(const std::string& method);
  Result<Proc*> FindProc(const std::string& cid, const std::string& exec_id);
  void StartProc(const std::string& cid, const std::string& exec_id, Proc& p);
  void ExitProc(Proc& p, int status);
  Result<av1::ReadStreamResponse> Read(const av1::ReadStreamRequest& req, bool err);

  std::function<void()> hang_create_;  // guarded by mu_
  std::map<std::string, std::function<void()>> holds_;           // guarded by mu_: armed
  std::set<std::string> held_;                                    // guarded by mu_: waiting
  std::map<std::string, std::chrono::milliseconds> time_outs_;  // guarded by mu_
  bool oversized_reads_ = false;  // guarded by mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  uint32_t next_pid_ = 100;
  std::vector<std::string> calls_;
  std::map<std::string, Status> failures_;
  std::map<std::pair<std::string, std::string>, Script> scripts_;
  std::map<std::string, Ctr> containers_;
  av1::CreateSandboxRequest sandbox_;
  std::deque<std::string> ooms_;
  std::string last_update_;
  uint64_t reseeds_ = 0;
  av1::SetGuestTimeRequest guest_time_;
};

}  // namespace capsule::testing
