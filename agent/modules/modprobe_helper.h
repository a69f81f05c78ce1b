// The agent as the guest kernel's modprobe helper. When something in the
// guest needs a module that is not loaded (a privileged container's
// `ip link add type bridge`, iptables' nat table, an overlay mount), the
// kernel runs /proc/sys/kernel/modprobe as "-q -- <name or alias>". At boot
// the agent points that at itself (InstallModprobeHelper); run under that
// name, the same binary resolves the request through modules.alias and
// modules.dep and loads the module with its dependencies by finit_module:
// first from the host's module tree in the share (config guest.modules,
// read-only to the guest, so containers cannot plant modules), then from
// the image's own /lib/modules. Only modules the allowlist names are loaded
// (module_policy.h). Failures and refusals go to the kernel log.
//
// The kernel starts helpers in its own root: the raw initramfs, without
// the mounts of PID 1's root (the agent moved its root onto a bind mount,
// agent/init/root.cc). The helper therefore enters a private mount
// namespace and chroots into PID 1's root before it reads anything.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/modules/module_policy.h"
#include "runtime/common/status.h"

namespace capsule::agent::modules {

// The name the kernel is given, a symlink to the agent's binary.
inline constexpr const char* kModprobeHelperPath = "/sbin/capsule-modprobe";

// Whether argv[0] asks for the helper.
bool IsModprobeHelper(std::string_view argv0);

// Makes the symlink and writes /proc/sys/kernel/modprobe (PID 1, at boot).
Status InstallModprobeHelper();

// main() of the helper: 0 when every requested module is loaded (or built
// in), 1 otherwise.
int RunModprobeHelper(int argc, char** argv);

// What a node's kernel already has loaded and nothing in the guest kernel
// asks for: iptables-legacy talks to ip_tables/ip6_tables through socket
// options that exist only once those modules are loaded, and otherwise runs
// /sbin/modprobe itself, inside its container, where there is none. Loaded
// once per guest, for the first container that may use them (one with
// CAP_NET_ADMIN), so other pods pay nothing. Best effort: errors are logged.
void LoadNetAdminBaseline();

// The module trees the helper searches for `release`, in order.
std::vector<std::string> ModuleTrees(std::string_view release);

// Loads `request` (a module name or an alias) from the first tree in
// `trees` whose modules.dep knows it: its softdep "pre" modules first (best
// effort), then every module the alias names that `policy` allows, each
// with its dependencies. NOT_FOUND when no tree knows it;
// PERMISSION_DENIED, naming the modules, when the policy allows none.
Status LoadModuleRequest(std::string_view request, const std::vector<std::string>& trees,
                         const ModulePolicy& policy);

}  // namespace capsule::agent::modules
