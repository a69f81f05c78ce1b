// LyingAgent: an AgentClient for one guest process whose answers each test
// scripts, lies included (more output than asked, an impossible exit
// status). Everything but the guest-process calls is UNIMPLEMENTED. The
// real agent is the peer of tests/e2e/cri_guest_exec_e2e_test.cc.
#pragma once

#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/agentclient/agent_client.h"

namespace capsule::guestexec {

namespace v1 = agentclient::v1;

class LyingAgent : public agentclient::AgentClient {
 public:
  // Scripted answers.
  Status exec_error;                  // ExecGuestProcess's, when not OK
  std::deque<std::string> stdout_chunks;  // then eof
  int32_t exit_status = 0;
  bool wait_for_signal = false;       // WaitProcess blocks until SignalProcess, then 128 + that signal
  bool exit_on_kill = false;          // WaitProcess blocks until a SIGKILL, then 137 (other signals are ignored)
  bool exit_on_stdin_eof = false;     // WaitProcess blocks until CloseStdin, as `cat` would
  bool stalled = false;               // WaitProcess blocks until Close(); SignalProcess times out
  bool remove_first_fails = false;    // the first RemoveProcess says the process still runs
  bool empty_reads = false;           // stdout reads bring nothing, not even eof, until Close()
  std::chrono::milliseconds exit_after{0};  // WaitProcess answers exit_status after this long

  // What the session did.
  std::mutex mu;
  int stdout_reads = 0;
  std::vector<v1::SignalProcessRequest> signals;
  std::vector<std::string> removed;
  std::string stdin_data;
  bool stdin_closed = false;
  bool closed = false;
  int remove_calls = 0;

  Result<v1::ExecProcessResponse> ExecGuestProcess(const v1::ExecGuestProcessRequest& req) override {
    std::lock_guard lock(mu);
    exec_id_ = req.exec_id();  // a start that timed out may have started it after all
    if (!exec_error.ok()) return exec_error;
    v1::ExecProcessResponse r;
    r.set_pid(42);
    return r;
  }
  Result<v1::ReadStreamResponse> ReadStdout(const v1::ReadStreamRequest&) override {
    std::lock_guard lock(mu);
    ++stdout_reads;
    v1::ReadStreamResponse r;
    if (empty_reads) {
      if (closed) return Cancelled("agent ReadStdout: the channel was closed");
      return r;
    }
    if (stdout_chunks.empty()) {
      r.set_eof(true);
    } else {
      r.set_data(stdout_chunks.front());
      stdout_chunks.pop_front();
    }
    return r;
  }
  Result<v1::ReadStreamResponse> ReadStderr(const v1::ReadStreamRequest&) override {
    v1::ReadStreamResponse r;
    r.set_eof(true);
    return r;
  }
  Result<v1::WriteStreamResponse> WriteStdin(const v1::WriteStreamRequest& req) override {
    std::lock_guard lock(mu);
    stdin_data += req.data();
    v1::WriteStreamResponse r;
    r.set_len(static_cast<uint32_t>(req.data().size()));
    return r;
  }
  Status CloseStdin(const v1::CloseStdinRequest&) override {
    std::lock_guard lock(mu);
    stdin_closed = true;
    cv_.notify_all();
    return Status::Ok();
  }
  Result<v1::WaitProcessResponse> WaitProcess(const v1::WaitProcessRequest&,
                                              std::optional<std::chrono::milliseconds>) override {
    std::unique_lock lock(mu);
    v1::WaitProcessResponse r;
    if (stalled) {
      cv_.wait(lock, [&] { return closed; });
      return Cancelled("agent WaitProcess: the channel was closed");
    }
    if (exit_on_stdin_eof) cv_.wait(lock, [&] { return stdin_closed; });
    if (exit_after.count() > 0) cv_.wait_for(lock, exit_after, [&] { return closed; });
    if (exit_on_kill) {
      cv_.wait(lock, [&] {
        return std::any_of(signals.begin(), signals.end(), [](const auto& s) { return s.signal() == SIGKILL; });
      });
      r.set_status(128 + SIGKILL);
      return r;
    }
    if (wait_for_signal) {
      cv_.wait(lock, [&] { return !signals.empty(); });
      r.set_status(128 + static_cast<int32_t>(signals.front().signal()));
    } else {
      r.set_status(exit_status);
    }
    return r;
  }
  Status SignalProcess(const v1::SignalProcessRequest& req) override {
    std::lock_guard lock(mu);
    signals.push_back(req);
    cv_.notify_all();
    if (stalled) return DeadlineExceeded("agent SignalProcess: deadline exceeded after 75000 ms");
    return Status::Ok();
  }
  Status RemoveProcess(const v1::RemoveProcessRequest& req) override {
    std::lock_guard lock(mu);
    if (closed) return Unavailable("agent RemoveProcess: the channel was closed");
    if (remove_first_fails && ++remove_calls == 1) return FailedPrecondition("guest process is still running");
    if (req.container_id().empty() && req.exec_id() == exec_id_) removed.push_back(req.exec_id());
    return Status::Ok();
  }
  void Close() override {
    std::lock_guard lock(mu);
    closed = true;
    cv_.notify_all();
  }

  // The rest of the agent: not part of a guest exec session.
  Result<v1::CheckResponse> Check(std::chrono::milliseconds) override { return No(); }
  Result<v1::VersionResponse> Version() override { return No(); }
  Status SetGuestTime(const v1::SetGuestTimeRequest&) override { return No(); }
  Result<v1::AddRandomnessResponse> AddRandomness(const v1::AddRandomnessRequest&) override { return No(); }
  Status CreateSandbox(const v1::CreateSandboxRequest&) override { return No(); }
  Result<v1::SetupSandboxResponse> SetupSandbox(const v1::SetupSandboxRequest&) override { return No(); }
  Status DestroySandbox(const v1::DestroySandboxRequest&) override { return No(); }
  Result<v1::CreateContainerResponse> CreateContainer(const v1::CreateContainerRequest&) override { return No(); }
  Result<v1::StartContainerResponse> StartContainer(const v1::StartContainerRequest&) override { return No(); }
  Status RemoveContainer(const v1::RemoveContainerRequest&) override { return No(); }
  Result<v1::ExecProcessResponse> ExecProcess(const v1::ExecProcessRequest&) override { return No(); }
  Result<v1::ListProcessesResponse> ListProcesses(const v1::ListProcessesRequest&) override { return No(); }
  Status UpdateContainer(const v1::UpdateContainerRequest&) override { return No(); }
  Result<v1::StatsContainerResponse> StatsContainer(const v1::StatsContainerRequest&) override { return No(); }
  Status PauseContainer(const v1::PauseContainerRequest&) override { return No(); }
  Status ResumeContainer(const v1::ResumeContainerRequest&) override { return No(); }
  Result<v1::OOMEvent> GetOOMEvent(std::chrono::milliseconds) override { return No(); }
  Status TtyWinResize(const v1::TtyWinResizeRequest&) override { return No(); }
  Result<v1::Interface> UpdateInterface(const v1::UpdateInterfaceRequest&) override { return No(); }
  Result<v1::Routes> UpdateRoutes(const v1::UpdateRoutesRequest&) override { return No(); }
  Result<v1::Interfaces> ListInterfaces() override { return No(); }
  Result<v1::Routes> ListRoutes() override { return No(); }
  Result<v1::ReadGuestFileResponse> ReadGuestFile(const v1::ReadGuestFileRequest&) override { return No(); }

 private:
  static Status No() { return Unimplemented("not part of a guest exec session"); }
  std::condition_variable cv_;
  std::string exec_id_;
};

}  // namespace capsule::guestexec
