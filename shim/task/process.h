// Process: one process of a container in the guest — its init or an exec —
// with its state (process_state.h), its stdio copier and an exit watcher.
//
// Threads: Task calls come in on ttrpc workers; after Start, one watcher
// thread blocks in the agent's WaitProcess, then drains the output (so no
// output is lost and CRI's ExecSync sees its FIFOs close), then records the
// exit and calls the exit observer (which only queues /tasks/exit) under the
// process lock, so a Delete that follows a Wait always finds the process
// stopped and its exit event already queued.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "shim/io/stdio_copier.h"
#include "shim/pod/agent_handle.h"
#include "shim/task/process_state.h"

namespace capsule::shim::task {

// How long the report of an exit waits for the output still in flight.
// ctr deletes the task, and closes its end of the output, as soon as it
// hears of the exit, so output that had not reached it by then would be
// lost; a process whose output stays open (a grandchild holding it) is
// reported this much late at most, and its output goes on flowing.
inline constexpr std::chrono::milliseconds kExitOutputGrace{1000};
// How long output may keep flowing after a process exited before the host
// ends are closed (counted from the exit).
inline constexpr std::chrono::milliseconds kExitDrainTimeout{5000};

class Process;
// Called once per process, under the process's lock: must only queue.
using ExitObserver = std::function<void(const Process& process, const ExitInfo& exit)>;

struct ProcessParams {
  std::string container_id;
  std::string exec_id;       // "" for the container's init
  std::string process_json;  // an exec's OCI Process; unused for the init
  uint32_t host_pid = 0;     // reported to containerd: the VMM's pid
  io::StdioSpec stdio;
  pod::AgentHandlePtr agent;
  // An init already running in the guest (the pod holder the agent made
  // before the claim): Start asks the agent nothing and reports this pid.
  uint32_t running_guest_pid = 0;
  // True once the VM is gone: a failed wait then means "killed with it".
  std::function<bool()> vm_gone;
  ExitObserver on_exit;
  // Runs on the exit watcher once the guest reported the exit, before it is
  // recorded and reported: what must be on the host by the time containerd
  // (and the kubelet behind it) sees the exit.
  std::function<void()> before_exit;
};

struct ProcessSnapshot {
  ProcessState state = ProcessState::kCreated;
  uint32_t host_pid = 0;
  uint32_t guest_pid = 0;
  std::optional<ExitInfo> exit;
};

class Process {
 public:
  // Opens the host ends of its stdio (FIFOs, file, logging binary).
  static Result<std::unique_ptr<Process>> Create(ProcessParams params);
  ~Process();  // joins the watcher (it returns once the agent answers or is revoked)
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  const std::string& container_id() const { return p_.container_id; }
  const std::string& exec_id() const { return p_.exec_id; }
  bool is_init() const { return p_.exec_id.empty(); }
  uint32_t host_pid() const { return p_.host_pid; }
  const io::StdioSpec& stdio() const { return p_.stdio; }
  std::string Name() const;  // "container c1" / "exec e1 of c1"

  // True when the host has no stdin for it: the create or exec request asks
  // the agent to close it (stdin_closed), one round trip fewer than a
  // CloseStdin after it.
  bool StdinClosedAtCreate() const;
  // Init only: the agent created the container (`stdin_closed`: with the
  // request's stdin_closed); start copying its output.
  Status AttachStdio(bool stdin_closed);
  // created -> running. Returns the host pid. The init's agent
  // StartContainer, an exec's ExecProcess. When the agent cannot start it
  // the process goes created -> stopped (exit 127 or 126) so that a Wait
  // returns and a Kill answers NOT_FOUND at once: containerd's
  // WithProcessKill, which CRI runs after a failed start, waits for that.
  // An init's failed start publishes its exit; an exec's does not (it never
  // had a start event), as runc's shim. The lock is not held while the
  // agent answers: State, Kill and Wait answer meanwhile (the process is
  // still created), a second Start and a Delete fail FAILED_PRECONDITION.
  Result<uint32_t> Start();
  // Starts the exit watcher; call after the start event was queued, so
  // /tasks/exit always follows /tasks/start. Idempotent.
  void WatchExit();
  // NOT_FOUND once stopped (containerd's contract: CRI's stop relies on it).
  Status Kill(uint32_t signal, bool all);
  // Blocks until the process stopped (works before Start).
  ExitInfo Wait();
  // created|stopped -> deleted; FAILED_PRECONDITION while running. Waits
  // first for the output of a stopped process to be copied out (at most
  // the drain's limits). An exec is forgotten by the agent; an init goes
  // with its container.
  Result<ExitInfo> Delete();
  // The process can no longer run (its container's creation was undone, its
  // container was deleted, the shim is stopping): -> stopped with `status`
  // without asking the agent, so every Wait on it returns. No-op once
  // stopped. A never-started exec publishes no exit.
  void Abandon(uint32_t status);
  // From now on its exit publishes nothing: a process of a creation that
  // was undone, whose task containerd never had.
  void DropEvents();
  Status ResizePty(uint32_t width, uint32_t height);
  void CloseStdin();
  ProcessSnapshot Snapshot() const;

 private:
  explicit Process(ProcessParams params) : p_(std::move(params)) {}
  bool StdinClosedAtCreateLocked() const;  // mu_ held
  // `stdin_closed`: an exec's ExecProcessRequest.stdin_closed.
  // The guest pid; `agent_ms` gets the agent's own time for an init's start
  // (StartContainerResponse.handled_us), left alone for an exec.
  Result<uint32_t> StartInAgent(bool stdin_closed, std::optional<double>* agent_ms);
  ExitInfo AwaitExit();
  // OK once the output drained (or there is none to copy); DEADLINE_EXCEEDED
  // when `timeout` passed first.
  Status WaitOutput(std::chrono::milliseconds timeout);
  // Waits for the output until `deadline`, then closes the host ends.
  void DrainOutput(std::chrono::steady_clock::time_point deadline);
  void RecordExit(const ExitInfo& exit);
  void RecordExitLocked(const ExitInfo& exit);  // mu_ held

  const ProcessParams p_;
  std::thread watcher_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  ProcessState state_ = ProcessState::kCreated;  // guarded by mu_
  uint32_t guest_pid_ = 0;                       // guarded by mu_
  std::optional<ExitInfo> exit_;                 // guarded by mu_
  bool stdio_attached_ = false;                  // guarded by mu_
  bool started_in_agent_ = false;                // guarded by mu_
  bool starting_ = false;  // guarded by mu_: Start is waiting for the agent
  bool drop_events_ = false;  // guarded by mu_
  bool draining_ = false;     // guarded by mu_: exited, output still being copied
  // Set at Create; dropped once drained, which closes the host ends.
  std::shared_ptr<io::StdioCopier> copier_;      // guarded by mu_
};
// Shared: a Task call may hold a process while another deletes it.
using ProcessPtr = std::shared_ptr<Process>;

}  // namespace capsule::shim::task
