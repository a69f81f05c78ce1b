// `capsule-runtime install` / `uninstall`: put Capsule on a node (the
// shim, capsule-vsockd, the guest image, config.yaml, containerd's drop-in
// and import) or take it off again; runtime/install does the work. The
// DaemonSet runs `install --root /host --wait --label-node $(NODE_NAME)`:
// its image has no shell, so this process stays up (and with
// --uninstall-on-exit uninstalls on SIGTERM). --label-node sets the label the
// RuntimeClass schedules by once the runtime is in place, and removes it
// before the runtime is taken away (runtime/install/node_label.h).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/cli/command.h"
#include "runtime/common/logging.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"
#include "runtime/host/stop_signals.h"
#include "runtime/install/installer.h"
#include "runtime/install/kube_api.h"
#include "runtime/install/node_label.h"

namespace capsule::cli {
namespace {

// systemd's own stop and start timeouts are 90 s each.
constexpr std::chrono::milliseconds kRestartTimeout{240000};

struct InstallFlags {
  install::InstallOptions opts;
  install::KubeApiOptions kube;
  std::string label_node;  // "" = leave the Node's labels alone
  bool restart = false;
  bool json = false;
  bool wait = false;
  bool uninstall_on_exit = false;
};

// `systemctl restart containerd` on the node. With a --root other than /
// (a pod with hostPID) it runs in PID 1's mount namespace (nsenter), so the
// node's systemctl talks to the node's systemd.
Status RestartContainerd(const std::string& root) {
  SpawnOptions o;
  o.argv = {"/usr/bin/env", "systemctl", "restart", "containerd"};
  if (root != "/") o.argv = {"/usr/bin/nsenter", "--target=1", "--mount", "systemctl", "restart", "containerd"};
  o.stdout_fd = STDOUT_FILENO;
  o.stderr_fd = STDERR_FILENO;
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  ASSIGN_OR_RETURN(int status, child.Wait(kRestartTimeout));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Unavailable(fmt::format("{} failed (wait status {}){}", fmt::join(o.argv, " "), status,
                                   root != "/" ? ": joining PID 1's mount namespace needs hostPID and privileges"
                                               : ""));
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

// `systemctl restart containerd` after `name` when asked and its config
// changed. Returns the exit code.
int MaybeRestart(const InstallFlags& f, const install::InstallReport& report, const char* name) {
  if (!f.restart) return 0;
  if (!report.containerd_config_changed) {
    std::fprintf(stderr, "capsule-runtime %s: containerd config unchanged; containerd not restarted\n", name);
    return 0;
  }
  Status st = RestartContainerd(f.opts.root);
  if (!st.ok()) return Fail(name, st);
  std::fprintf(stderr, "capsule-runtime %s: restarted containerd\n", name);
  return 0;
}

// Install, restart containerd, then label the node: the label is what lets
// the RuntimeClass schedule capsule pods here, so it comes last. A label
// that fails is not rolled back: the install is idempotent and a rerun (the
// DaemonSet's restart) only retries the label, while an uninstall would
// take the runtime from under pods already running here.
int RunInstall(const InstallFlags& f) {
  auto report = install::Install(f.opts);
  if (!report.ok()) return Fail("install", report.status());
  PrintReport(*report, f.json);
  if (int rc = MaybeRestart(f, *report, "install"); rc != 0) return rc;
  if (f.label_node.empty()) return 0;
  if (report->containerd_config_changed && !f.restart) {
    std::fprintf(stderr,
                 "capsule-runtime install: warning: containerd's config changed and containerd was not restarted; "
                 "capsule pods scheduled here fail until it is\n");
  }
  Status st = install::LabelNode(f.kube, f.label_node);
  if (!st.ok()) {
    return Fail("install", st.WithMessage(st.message() + "; Capsule is installed on this node (not rolled back), "
                                          "but the capsule RuntimeClass schedules no pods on a node without " +
                                          install::kRuntimeLabel + "=true; rerun install to retry the label "
                                          "(it changes nothing else), or run capsule-runtime uninstall"));
  }
  std::fprintf(stderr, "capsule-runtime install: labelled node %s %s=true\n", f.label_node.c_str(),
               install::kRuntimeLabel);
  return 0;
}

// The label first, so no capsule pod is scheduled here once the runtime
// starts going away; if it cannot be removed nothing is uninstalled, which
// leaves the node consistent (labelled and able to run capsule pods).
int RunUninstall(const InstallFlags& f) {
  if (!f.label_node.empty()) {
    Status st = install::UnlabelNode(f.kube, f.label_node);
    if (!st.ok()) {
      return Fail("uninstall", st.WithMessage(st.message() + "; nothing uninstalled: the node keeps its label "
                                              "and the runtime; retry, or uninstall without --label-node"));
    }
    std::fprintf(stderr, "capsule-runtime uninstall: removed label %s from node %s\n", install::kRuntimeLabel,
                 f.label_node.c_str());
  }
  auto report = install::Uninstall(f.opts);
  if (!report.ok()) return Fail("uninstall", report.status());
  PrintReport(*report, f.json);
  return MaybeRestart(f, *report, "uninstall");
}

int RunAction(const InstallFlags& f, bool uninstall) { return uninstall ? RunUninstall(f) : RunInstall(f); }

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

// --label-node and where the Kubernetes API is; the defaults are a pod's
// in-cluster config.
void AddLabelFlags(CLI::App* app, InstallFlags& f, const std::string& label_help) {
  CLI::Option* node = app->add_option("--label-node", f.label_node, label_help)->type_name("NAME");
  app->add_option("--kube-api", f.kube.api_url,
                  "Kubernetes API for --label-node, https://HOST[:PORT] "
                  "(default: in-cluster, https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)")
      ->type_name("URL")
      ->needs(node);
  app->add_option("--kube-token-file", f.kube.token_file, "bearer token for the Kubernetes API")
      ->type_name("FILE")
      ->capture_default_str()
      ->needs(node);
  app->add_option("--kube-ca-file", f.kube.ca_file,
                  "CA the API server's certificate must chain to (always verified)")
      ->type_name("FILE")
      ->capture_default_str()
      ->needs(node);
}

// Before anything on the node changes: the node name and the API's
// settings (URL, token, CA file) must be usable.
Status CheckLabelFlags(const InstallFlags& f) {
  if (f.label_node.empty()) return Status::Ok();
  RETURN_IF_ERROR_CTX(install::ValidateNodeName(f.label_node), "--label-node");
  auto api = install::KubeApi::Create(f.kube);
  if (!api.ok()) return std::move(api).status().WithContext("--label-node " + f.label_node);
  return Status::Ok();
}

constexpr char kInstallFooter[] =
    "With --label-node, the node is labelled capsule.io/runtime=true (the capsule RuntimeClass's nodeSelector)\n"
    "after the install and containerd's restart. If labelling fails, install exits non-zero and leaves Capsule\n"
    "installed (not rolled back): rerunning install retries only the label. With --wait --uninstall-on-exit the\n"
    "label is removed before uninstalling. The API's certificate is always verified against --kube-ca-file.";
constexpr char kUninstallFooter[] =
    "With --label-node, capsule.io/runtime is removed from the node first, so no capsule pod is scheduled\n"
    "while the runtime goes away; if that fails, nothing is uninstalled.";

}  // namespace

std::vector<Command> AddInstallCommands(CLI::App& parent, const GlobalFlags& /*flags*/) {
  auto f = std::make_shared<InstallFlags>();
  Command inst;
  inst.app = parent.add_subcommand("install", "install Capsule on this node and add it to containerd's config");
  AddCommonFlags(inst.app, *f);
  inst.app->add_option("--from", f->opts.from, "install tree to copy from (default: the one this binary is in)");
  inst.app->add_flag("--uninstall-on-exit", f->uninstall_on_exit, "with --wait: uninstall on SIGTERM");
  AddLabelFlags(inst.app, *f,
                "then label Kubernetes node NAME capsule.io/runtime=true (in the DaemonSet: $(NODE_NAME))");
  inst.app->footer(kInstallFooter);
  inst.run = [f] {
    if (f->opts.from.empty()) {
      auto from = install::DefaultFromDir();
      if (!from.ok()) return Fail("install", from.status());
      f->opts.from = *from;
    }
    if (Status st = CheckLabelFlags(*f); !st.ok()) return Fail("install", st);
    return RunThenWait(*f, false);
  };
  Command un;
  un.app = parent.add_subcommand("uninstall", "undo capsule-runtime install (what its manifest records)");
  AddCommonFlags(un.app, *f);
  AddLabelFlags(un.app, *f, "first remove the label capsule.io/runtime from Kubernetes node NAME");
  un.app->footer(kUninstallFooter);
  un.run = [f] {
    if (Status st = CheckLabelFlags(*f); !st.ok()) return Fail("uninstall", st);
    return RunThenWait(*f, true);
  };
  return {std::move(inst), std::move(un)};
}

}  // namespace capsule::cli
