// Where the initrd keeps kernel modules, written by deploy's image builder
// and read by the agent's loader.
#pragma once

namespace capsule::agent::modules {

// Modules live at their usual place, /lib/modules/<uname -r>/<path in modules.dep>.
inline constexpr const char* kModulesRoot = "/lib/modules";
// Relative .ko paths, one per line, dependencies first: what the agent loads
// at boot, in this order.
inline constexpr const char* kBootOrderFile = "capsule-modules.order";
// modules.dep restricted to the shipped modules, and the kernel's own list of
// built-in modules: for loading extra modules by name (CreateSandbox).
inline constexpr const char* kModulesDepFile = "modules.dep";
inline constexpr const char* kModulesBuiltinFile = "modules.builtin";

}  // namespace capsule::agent::modules
