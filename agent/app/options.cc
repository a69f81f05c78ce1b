// CLI11 parsing; as PID 1 unknown words are allowed and errors ignored.
#include "agent/app/options.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "runtime/common/version.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent::app {

ParsedArgs ParseArgs(int argc, char** argv, bool is_pid1) {
  ParsedArgs out;
  CLI::App app{"capsule-agent: PID 1 of a Capsule pod VM, serving capsule.agent.v1.Agent over vsock"};
  app.set_version_flag("--version", std::string("capsule-agent ") + kVersion);
  bool no_init = false;
  std::vector<std::string> listen;
  std::string level;
  std::string forward_listen;
  app.add_flag("--no-init", no_init, "run as a normal process: no PID-1 duties (implied when PID != 1)");
  app.add_option("--listen", listen, "vsock:PORT or unix:/PATH, repeatable (default vsock:1024)");
  app.add_option("--forward-listen", forward_listen,
                 "vsock:PORT or unix:/PATH for the port forwarder (default vsock:" +
                     std::to_string(guest_abi::kPortForwardVsockPort) + " when --listen is not given, else none)");
  app.add_option("--log-level", level, "trace|debug|info|warn|error");
  app.add_option("--resolv-conf", out.options.resolv_conf, "where CreateSandbox writes DNS settings")
      ->capture_default_str();
  app.add_option("--modules-dir", out.options.modules_dir, "module tree (default /lib/modules/<uname -r>)");
  app.add_flag("!--host-namespaces", out.options.private_namespaces,
               "with --no-init: stay in the host's mount and UTS namespaces");
  app.add_option("--ready-fd", out.options.ready_fd, "fd to write \"ready\\n\" to once serving");
  app.add_option("--auth-token-file", out.options.auth_token_file,
                 "with --no-init: every connection must first prove the token in this file (read per connection; "
                 "as PID 1 the token comes from fw_cfg " + std::string(guest_abi::kAgentTokenFwCfgName) + ")");
  app.add_option("--cgroup-root", out.options.cgroup_root,
                 "cgroup2 mount for containers (default /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts)");
  app.add_option("--cgroup-parent", out.options.cgroup_parent,
                 "cgroup under the root for containers without linux.cgroupsPath")
      ->capture_default_str();
  app.add_option("--max-blocking-calls", out.options.max_blocking_calls,
                 "blocking RPCs (Wait, Read*, WriteStdin, GetOOMEvent) admitted at once")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  if (is_pid1) app.allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (!is_pid1) {
      out.exit_code = app.exit(e);
      return out;
    }
  }
  out.options.init = is_pid1 && !no_init;
  for (const auto& l : listen) {
    auto ep = server::ParseEndpoint(l);
    if (!ep.ok()) {
      std::fprintf(stderr, "capsule-agent: --listen: %s\n", ep.status().message().c_str());
      if (!is_pid1) out.exit_code = 2;
      continue;
    }
    out.options.listen.push_back(*ep);
  }
  if (!forward_listen.empty()) {
    auto ep = server::ParseEndpoint(forward_listen);
    if (ep.ok()) {
      out.options.forward_listen = *ep;
    } else {
      std::fprintf(stderr, "capsule-agent: --forward-listen: %s\n", ep.status().message().c_str());
      if (!is_pid1) out.exit_code = 2;
    }
  }
  if (out.options.listen.empty()) {
    out.options.listen.push_back(server::Endpoint{server::Endpoint::Kind::kVsock, guest_abi::kAgentVsockPort, ""});
    if (!out.options.forward_listen)
      out.options.forward_listen = server::Endpoint{server::Endpoint::Kind::kVsock, guest_abi::kPortForwardVsockPort, ""};
  }
  if (!level.empty()) {
    out.options.log_level = log::ParseLevel(level);
    if (!out.options.log_level && !is_pid1) {
      std::fprintf(stderr, "capsule-agent: --log-level: unknown level '%s'\n", level.c_str());
      out.exit_code = 2;
    }
  }
  return out;
}

}  // namespace capsule::agent::app
