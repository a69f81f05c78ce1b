// One `capsule-runtime exec` run against a VM's agent: ExecGuestProcess,
// then the caller's stdin to the process (WriteStdin/CloseStdin), its
// stdout and stderr back (ReadStdout/ReadStderr), the window size on
// SIGWINCH (TtyWinResize), SIGINT/SIGTERM/SIGHUP forwarded to everything
// the command started (a second one kills it, and so does running past the
// timeout), and WaitProcess for its exit status. The process is always removed at the end (RemoveProcess), which
// also ends whatever it left running in the guest.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agentclient/agent_client.h"
#include "runtime/common/status.h"
#include "runtime/guestexec/raw_terminal.h"

namespace capsule::guestexec {

struct ExecOptions {
  std::vector<std::string> args;
  // KEY=VALUE, after (and overriding) the defaults: PATH, HOME and, with a
  // tty, TERM.
  std::vector<std::string> env;
  std::string cwd = "/";
  bool tty = false;
  // Pass the caller's stdin; without it the process reads end of file (pipes)
  // or nothing (tty).
  bool pass_stdin = false;
  std::string tools_container;  // "": the guest's own root (agent.proto ExecGuestProcessRequest)
  // With tools_container: run as the guest's root instead of as that
  // container's init runs (the tenant may have changed those files).
  bool tools_as_root = false;
  std::optional<WindowSize> size;  // tty: the initial window size
  std::string term = "xterm";     // tty: TERM in the guest
  // Once the command was killed on the caller's insistence (a second
  // signal), or the agent no longer answers a signal: how long the guest has
  // to report its exit before the session closes the connection.
  std::chrono::milliseconds give_up_wait{5000};
  // The command is killed (everything it started) when it runs longer.
  std::optional<std::chrono::milliseconds> timeout;
};

// OCI process JSON for ExecGuestProcessRequest.process_json.
std::string GuestProcessJson(const ExecOptions& options);

struct SessionFds {
  int in = 0, out = 1, err = 2;
  int signals = -1;   // a BlockedSignals fd (SIGINT, SIGTERM, SIGHUP, SIGWINCH), or -1
  int terminal = -1;  // where SIGWINCH reads the new size (the caller's tty), or -1
};

struct SessionResult {
  bool started = false;  // false: the guest could not start the command (status says why)
  Status status;         // the session's error, if any
  int exit_status = 0;   // the command's exit code, or 128 + signal (0..255)
  bool timed_out = false;  // killed for running past ExecOptions::timeout (status says so)
};

SessionResult RunGuestExec(agentclient::AgentClient& agent, const ExecOptions& options, const SessionFds& fds);

}  // namespace capsule::guestexec
