// `capsule-runtime exec POD -- CMD...`: runs a command in a pod's guest,
// outside its containers, through the guest's agent (runtime/guestexec), as
// `kubectl exec` does inside a container. For operators: the guest's
// processes, mounts, network and kernel as the pod's containers cannot see
// them. Exit status: the command's, or 125 when capsule-runtime could not
// reach the guest, 126 when the guest could not start the command, 124 when
// it ran past --timeout.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "runtime/cli/command.h"
#include "runtime/common/logging.h"
#include "runtime/guestexec/guest_exec_session.h"
#include "runtime/guestexec/raw_terminal.h"
#include "runtime/host/blocked_signals.h"
#include "runtime/vm/pod_lookup.h"
#include "runtime/vm/vm_agent.h"

namespace capsule::cli {
namespace {

constexpr int kReachFailed = 125;
constexpr int kStartFailed = 126;
// Deadline of the session's agent calls that do not wait for the command:
// above the agent's own bound on starting a process (60 s), so a slow start
// under TCG is not taken for a failed one.
constexpr std::chrono::seconds kCallTimeout{75};
// Signals and window sizes: the session's loop waits for them, and must
// keep answering the user when the agent stalls.
constexpr std::chrono::seconds kSignalCallTimeout{2};
// What timeout(1) exits with when the command ran too long.
constexpr int kTimedOut = 124;

struct ExecFlags {
  std::string pod;
  std::vector<std::string> command;
  bool tty = false;
  bool pass_stdin = false;
  std::string tools_from;
  bool tools_as_root = false;
  std::vector<std::string> env;
  std::string cwd = "/";
  int timeout_s = 10;
  int run_timeout_s = 0;  // 0: none
};

Status CheckFlags(const ExecFlags& f) {
  for (const std::string& kv : f.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgument("--env \"" + kv + "\": want KEY=VALUE");
  }
  if (f.cwd.empty() || f.cwd[0] != '/') return InvalidArgument("--workdir \"" + f.cwd + "\": want an absolute path");
  if (f.timeout_s <= 0) return InvalidArgument("--connect-timeout must be positive");
  if (f.run_timeout_s < 0) return InvalidArgument("--timeout must not be negative");
  if (f.tools_as_root && f.tools_from.empty()) return InvalidArgument("--tools-as-root needs --tools-from");
  return Status::Ok();
}

int RunExec(const GlobalFlags& flags, const ExecFlags& f) {
  // Before any thread exists, so no signal lands on gRPC's threads. A
  // closed stdout (`exec ... | head`) is a failed write, which the session
  // turns into SIGPIPE for the command, not a signal that kills us.
  BlockedSignals signals({SIGINT, SIGTERM, SIGHUP, SIGWINCH});
  std::signal(SIGPIPE, SIG_IGN);
  if (Status st = CheckFlags(f); !st.ok()) return Fail("exec", st, kReachFailed);
  auto cfg = LoadConfigFor(flags, "exec");
  if (!cfg.ok()) return kReachFailed;
  // stderr is the command's: only our warnings and errors join it, unless
  // --log-level asks for more.
  if (flags.log_level.empty()) log::SetLevel(log::Level::kWarn);
  auto vms = vm::ListVms(*cfg);
  if (!vms.ok()) return Fail("exec", vms.status(), kReachFailed);
  auto target = vm::FindPod(*vms, f.pod);
  if (!target.ok()) return Fail("exec", target.status(), kReachFailed);
  if (!target->vmm_running)
    return Fail("exec", FailedPrecondition("pod " + f.pod + ": its VM " + target->id + " is not running"), kReachFailed);
  auto agent = vm::ConnectVmAgent(target->state_dir, std::chrono::seconds(f.timeout_s), kCallTimeout, kSignalCallTimeout);
  if (!agent.ok())
    return Fail("exec", agent.status().WithContext("pod " + f.pod + ": reach the guest agent of VM " + target->id),
                kReachFailed);

  guestexec::ExecOptions o;
  o.args = f.command;
  o.env = f.env;
  o.cwd = f.cwd;
  o.tty = f.tty;
  o.pass_stdin = f.pass_stdin;
  o.tools_container = f.tools_from;
  o.tools_as_root = f.tools_as_root;
  if (f.run_timeout_s > 0) o.timeout = std::chrono::seconds(f.run_timeout_s);
  if (const char* term = std::getenv("TERM"); term != nullptr && *term != '\0') o.term = term;
  std::optional<guestexec::RawTerminal> raw;
  guestexec::SessionFds fds;
  fds.signals = signals.fd();
  if (f.tty) {
    auto entered = guestexec::RawTerminal::Enter(STDIN_FILENO);
    if (!entered.ok()) return Fail("exec", entered.status().WithContext("-t"), kReachFailed);
    raw.emplace(std::move(*entered));
    o.size = guestexec::TerminalSize(STDIN_FILENO);
    fds.terminal = STDIN_FILENO;
  }
  guestexec::SessionResult r = guestexec::RunGuestExec(**agent, o, fds);
  raw.reset();  // the terminal is the user's again before we print
  if (!r.started) {
    return Fail("exec", r.status.WithContext("pod " + f.pod + ": start \"" + f.command[0] + "\" in the guest" +
                                             (f.tools_from.empty() ? " (the guest's own root; the production image "
                                                                     "has no tools: --tools-from CONTAINER lends a "
                                                                     "container's)"
                                                                   : " with the tools of container " + f.tools_from)),
                kStartFailed);
  }
  if (r.timed_out) return Fail("exec", r.status.WithContext("pod " + f.pod), kTimedOut);
  if (!r.status.ok()) return Fail("exec", r.status.WithContext("pod " + f.pod), kReachFailed);
  return r.exit_status;
}

}  // namespace

Command AddExecCommand(CLI::App& parent, const GlobalFlags& flags) {
  Command c;
  auto f = std::make_shared<ExecFlags>();
  c.app = parent.add_subcommand(
      "exec",
      "run a command in a pod's guest, outside its containers: the guest's pid, network and mount view, as root.\n"
      "POD is the sandbox id (or a unique prefix of 4+ characters), the CRI pod as NAMESPACE/NAME, or the VM id\n"
      "(capsule-runtime ps lists them). The production guest image has no shell or tools: --tools-from CONTAINER\n"
      "runs the command with that container's root filesystem (read-only) as its \"/\", over the guest's\n"
      "/proc, /sys and /dev; the guest's own root is then /proc/1/root. The tenant may have changed those files,\n"
      "so they run as the container's init does (its user, capabilities and seccomp profile), outside every\n"
      "container; --tools-as-root runs them as the guest's root (lend only a container you trust).\n"
      "Exit status: the command's; 125 when the guest could not be reached, 126 when it could not start the command,\n"
      "124 when it ran past --timeout.");
  c.app->add_option("pod", f->pod, "the pod")->required();
  c.app->add_option("command", f->command, "the command and its arguments (after --)")->required();
  c.app->add_flag("-t,--tty", f->tty, "give the command a terminal (the caller's stdin must be one; raw mode)");
  c.app->add_flag("-i,--stdin", f->pass_stdin, "pass stdin to the command (without it the command reads end of file)");
  c.app->add_option("--tools-from", f->tools_from,
                    "a container of the pod whose root filesystem gives the tools: its CRI name (as kubectl "
                    "shows it), its id, or a unique prefix of the id");
  c.app->add_flag("--tools-as-root", f->tools_as_root,
                  "run the borrowed tools as the guest's root, with every capability and no seccomp, instead of as "
                  "the container's init runs: its tenant can have replaced them");
  c.app->add_option("-e,--env", f->env, "KEY=VALUE in the command's environment (repeatable)")
      ->allow_extra_args(false);
  c.app->add_option("-w,--workdir", f->cwd, "the command's working directory")->capture_default_str();
  c.app->add_option("--connect-timeout", f->timeout_s, "seconds to reach the guest's agent")->capture_default_str();
  c.app->add_option("--timeout", f->run_timeout_s,
                    "seconds the command may run; past them it is killed with all it started, and exec exits 124 "
                    "(0: no limit)")
      ->capture_default_str();
  c.run = [&flags, f] { return RunExec(flags, *f); };
  return c;
}

}  // namespace capsule::cli
