// The shim binary's command line, as containerd's shim v2 protocol passes it:
// Go `flag` package syntax (single-dash long flags, `-f v`, `-f=v`, `--f=v`),
// then one positional action, `start` or `delete`; no action runs the daemon.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::shim::launcher {

enum class Action { kDaemon, kStart, kDelete };

struct ShimFlags {
  std::string namespace_;      // -namespace: containerd namespace (required)
  std::string id;              // -id: task (container) id
  std::string address;         // -address: containerd's gRPC socket
  std::string publish_binary;  // -publish-binary: containerd binary (events)
  std::string bundle;          // -bundle: bundle dir; default: working dir
  bool debug = false;          // -debug
  bool version = false;        // -v, -version, --version
  bool help = false;           // -h, -help, --help
  // Daemon mode only (our own flags, set by `start` when it execs the daemon):
  int socket_fd = -1;          // -socket-fd: inherited listening socket
  std::string config_path;     // -config: runtimeoptions ConfigPath
  Action action = Action::kDaemon;
};

// Parses argv without argv[0]. Errors name the flag or argument, like Go's
// flag package ("flag provided but not defined: -x").
Result<ShimFlags> ParseFlags(const std::vector<std::string>& args);

// Checks what each action needs (namespace and id everywhere, a valid
// socket fd for the daemon) and that identifiers are containerd-valid.
Status ValidateFlags(const ShimFlags& flags);

// Arguments for the daemon that `start` execs (argv[0] not included).
std::vector<std::string> DaemonArgs(const ShimFlags& flags, const std::string& bundle,
                                    int socket_fd, const std::string& config_path);

std::string Usage(const std::string& program);

// containerd's identifier rule (identifiers.Validate): 1..76 characters,
// alphanumerics separated by single '.', '_' or '-'.
Status ValidateIdentifier(const std::string& what, const std::string& value);

}  // namespace capsule::shim::launcher
