// Kernel module dependency index from depmod's modules.dep: which .ko file a
// module name is, and in which order a set of modules must be loaded (each
// module after everything it depends on). Shared by the image builder (to
// pick the files and write the boot load order) and the agent (to load extra
// modules by name).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::agent::modules {

// "kernel/fs/fuse/fuse.ko.xz" -> "fuse"; "snd-hda.ko" -> "snd_hda" (the
// kernel treats '-' and '_' in module names alike and reports '_').
std::string ModuleNameFromPath(std::string_view path);
std::string NormalizeModuleName(std::string_view name);
// The lines of a module list file (modules.order, modules.allow) that are
// neither empty nor '#' comments.
std::vector<std::string> ModuleFileLines(std::string_view text);

class ModuleIndex {
 public:
  // Parses modules.dep ("path: dep-path dep-path ..."). `source` names the
  // file in errors.
  static Result<ModuleIndex> Parse(std::string_view modules_dep, std::string_view source);

  bool Contains(std::string_view name) const;
  // Relative path of the module's .ko, as written in modules.dep.
  Result<std::string> PathOf(std::string_view name) const;
  // Direct dependencies as module names.
  Result<std::vector<std::string>> DependenciesOf(std::string_view name) const;

  // Paths of `names` and all their dependencies, each once, dependencies
  // first; among independent modules the request order is kept. NOT_FOUND
  // names a module missing from the index, FAILED_PRECONDITION a cycle.
  Result<std::vector<std::string>> LoadOrder(const std::vector<std::string>& names) const;

  // modules.dep text restricted to `paths` (which must be closed under
  // dependencies), for an image that ships only those modules.
  std::string Subset(const std::vector<std::string>& paths) const;

  size_t size() const { return modules_.size(); }

 private:
  struct Entry {
    std::string path;
    std::vector<std::string> deps;  // module names
  };
  Status Visit(const std::string& name, std::set<std::string>& done,
               std::vector<std::string>& stack, std::vector<std::string>& out) const;

  std::map<std::string, Entry, std::less<>> modules_;  // by normalized name
  std::string source_;
};

// Names listed in modules.builtin ("kernel/.../x.ko" per line): built into
// the kernel image, so there is nothing to load.
std::set<std::string, std::less<>> ParseBuiltinModules(std::string_view modules_builtin);

}  // namespace capsule::agent::modules
