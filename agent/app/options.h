// capsule-agent's command line. As the guest's PID 1 the kernel starts it
// with no flags of ours (settings come from the kernel command line, see
// agent/config/settings.h) and may pass stray words, so parsing never fails
// there. Run by hand or by tests it is a normal process:
//   capsule-agent --no-init --listen unix:/tmp/agent.sock
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/server/endpoint.h"
#include "agent/server/limits.h"
#include "runtime/common/logging.h"

namespace capsule::agent::app {

struct AgentOptions {
  bool init = true;  // PID-1 duties: mounts, modules, power-off at the end
  std::vector<server::Endpoint> listen;  // default: vsock:1024
  // The port forwarder's (agent/forward); none: no port-forward.
  std::optional<server::Endpoint> forward_listen;
  std::optional<log::Level> log_level;   // init: from capsule.log=
  std::string resolv_conf = "/etc/resolv.conf";
  std::string modules_dir;  // default /lib/modules/<uname -r>
  // --no-init only: run in private mount and UTS namespaces, so sandbox
  // mounts and the hostname never reach the host.
  bool private_namespaces = true;
  int ready_fd = -1;  // written "ready\n" and closed once serving
  // --no-init: the agent token every connection must prove, read from this
  // file per connection (empty: none). As PID 1 it comes from fw_cfg.
  std::string auth_token_file;
  // Container engine: the cgroup2 mount (empty: /sys/fs/cgroup when it is
  // cgroup2, else a hybrid host's /sys/fs/cgroup/unified) and the folder
  // under it for containers without linux.cgroupsPath.
  std::string cgroup_root;
  std::string cgroup_parent = "capsule";
  // Blocking calls admitted at once (agent/server/limits.h).
  uint32_t max_blocking_calls = server::kDefaultMaxBlockingCalls;
};

struct ParsedArgs {
  std::optional<int> exit_code;  // --help, --version or a usage error: exit with it
  AgentOptions options;
};

// `is_pid1`: getpid() == 1.
ParsedArgs ParseArgs(int argc, char** argv, bool is_pid1);

}  // namespace capsule::agent::app
