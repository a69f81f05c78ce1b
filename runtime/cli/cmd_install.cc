// `capsule-runtime install` / `uninstall`: put Capsule on a node (the
// shim, capsule-vsockd, the guest image, config.yaml, containerd's drop-in
// and import) or take it off again; runtime/install does the work. The
// DaemonSet runs `install --root /host --wait --uninstall-on-exit`: its
// image has no shell, so this process stays up and uninstalls on SIGTERM.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "runtime/cli/command.h"
#include "runtime/common/stop_signals.h"
#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"
#include "runtime/install/installer.h"

namespace capsule::cli {
namespace {

struct InstallFlags {
  install::InstallOptions opts;
  bool restart = false;
  bool json = false;
  bool wait = false;
  bool uninstall_on_exit = false;
};

// `systemctl restart containerd` on the node. With a --root other than /
// (a pod with hostPID) the child first joins PID 1's mount namespace, so it
// runs the node's systemctl against the node's systemd.
Status RestartContainerd(const std::string& root) {
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) {
    if (root != "/") {
      int ns = ::open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNS) != 0) {
        std::perror("capsule-runtime: join PID 1's mount namespace (the pod needs hostPID and privileges)");
        ::_exit(125);
      }
    }
    ::execlp("systemctl", "systemctl", "restart", "containerd", static_cast<char*>(nullptr));
    std::perror("capsule-runtime: exec systemctl");
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("wait for systemctl");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Unavailable("systemctl restart containerd failed (wait status " + std::to_string(status) + ")");
  }
  return Status::Ok();
}

void PrintReport(const install::InstallReport& r, bool json) {
  if (json) {
    std::fputs(install::ReportToJson(r).c_str(), stdout);
    return;
  }
  for (const auto& p : r.written) std::printf("wrote     %s\n", p.c_str());
  for (const auto& p : r.unchanged) std::printf("unchanged %s\n", p.c_str());
  for (const auto& p : r.removed) std::printf("removed   %s\n", p.c_str());
  for (const auto& p : r.kept) std::printf("kept      %s\n", p.c_str());
  for (const auto& w : r.warnings) std::printf("warning:  %s\n", w.c_str());
  std::printf("containerd config %s\n", r.containerd_config_changed ? "changed" : "unchanged");
}

// Runs one action, prints its report, restarts containerd when asked and
// the config changed. Returns the exit code.
int RunAction(const InstallFlags& f, bool uninstall) {
  const char* name = uninstall ? "uninstall" : "install";
  auto report = uninstall ? install::Uninstall(f.opts) : install::Install(f.opts);
  if (!report.ok()) return Fail(name, report.status());
  PrintReport(*report, f.json);
  if (!f.restart) return 0;
  if (!report->containerd_config_changed) {
    std::fprintf(stderr, "capsule-runtime %s: containerd config unchanged; containerd not restarted\n", name);
    return 0;
  }
  Status st = RestartContainerd(f.opts.root);
  if (!st.ok()) return Fail(name, st);
  std::fprintf(stderr, "capsule-runtime %s: restarted containerd\n", name);
  return 0;
}


// The action, then with --wait: stay up until SIGTERM (a DaemonSet's pod
// must keep running), uninstalling then if asked. A failed action exits at
// once, so the pod crash-loops visibly instead of idling.
int RunThenWait(const InstallFlags& f, bool uninstall) {
  if (!f.wait) return RunAction(f, uninstall);
  // Blocked before the action, so an early SIGTERM still reaches sigwait
  // instead of killing us half-way through.
  BlockStopSignals();
  int rc = RunAction(f, uninstall);
  if (rc != 0) return rc;
  // Until the kubelet stops the pod.
  std::fprintf(stderr, "capsule-runtime: signal %d, exiting\n", WaitForStopSignal());
  if (!uninstall && f.uninstall_on_exit) rc = RunAction(f, true);
  return rc;
}

void AddCommonFlags(CLI::App* app, InstallFlags& f) {
  app->add_option("--root", f.opts.root, "the node's root directory (/host in the DaemonSet)")->capture_default_str();
  app->add_option("--containerd-config", f.opts.containerd_config, "containerd's config file, inside --root")
      ->capture_default_str();
  app->add_flag("--restart-containerd", f.restart, "systemctl restart containerd when its config changed");
  app->add_flag("--json", f.json, "print the result as JSON");
  app->add_flag("--wait", f.wait, "then stay running until SIGTERM (for a DaemonSet's pod)");
}

}  // namespace

std::vector<Command> AddInstallCommands(CLI::App& parent, const GlobalFlags& /*flags*/) {
  auto f = std::make_shared<InstallFlags>();
  Command inst;
  inst.app = parent.add_subcommand("install", "install Capsule on this node and add it to containerd's config");
  AddCommonFlags(inst.app, *f);
  inst.app->add_option("--from", f->opts.from, "install tree to copy from (default: the one this binary is in)");
  inst.app->add_flag("--uninstall-on-exit", f->uninstall_on_exit, "with --wait: uninstall on SIGTERM");
  inst.run = [f] {
    if (f->opts.from.empty()) {
      auto from = install::DefaultFromDir();
      if (!from.ok()) return Fail("install", from.status());
      f->opts.from = *from;
    }
    return RunThenWait(*f, false);
  };
  Command un;
  un.app = parent.add_subcommand("uninstall", "undo capsule-runtime install (what its manifest records)");
  AddCommonFlags(un.app, *f);
  un.run = [f] { return RunThenWait(*f, true); };
  return {std::move(inst), std::move(un)};
}

}  // namespace capsule::cli
