// Loading kernel modules from the image with finit_module(2): by name with
// their dependencies (CreateSandbox's kernel_modules), or the image's boot
// set in its recorded order. Modules already loaded or built in are fine.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/modules/module_index.h"
#include "runtime/common/status.h"

namespace capsule::agent::modules {

// What the sandbox code needs: load these modules (and what they need).
class ModuleLoader {
 public:
  virtual ~ModuleLoader() = default;
  virtual Status Load(const std::vector<std::string>& names) = 0;
};
using ModuleLoaderPtr = std::unique_ptr<ModuleLoader>;

enum class LoadOutcome { kLoaded, kAlreadyLoaded, kBuiltin };

struct BootLoadReport {
  std::vector<std::string> loaded;
  std::vector<std::string> already_loaded;
  std::vector<std::string> builtin;
  std::vector<Status> failed;  // each names its module
};

class KernelModuleLoader final : public ModuleLoader {
 public:
  // `dir` is /lib/modules/<release>; nothing is read until the first load.
  explicit KernelModuleLoader(std::string dir) : dir_(std::move(dir)) {}
  static std::string DefaultDir();  // /lib/modules/<uname -r>

  Status Load(const std::vector<std::string>& names) override;
  // Whether modules.dep lists the module or modules.builtin has it (both
  // read once, on first use; an error when modules.dep cannot be read).
  Result<bool> Knows(std::string_view name);
  // Loads every module in kBootOrderFile, going on past failures.
  Result<BootLoadReport> LoadBootSet();

 private:
  Status EnsureIndex();                                     // mu_ held
  Result<LoadOutcome> LoadFile(const std::string& rel_path);  // mu_ held

  const std::string dir_;
  std::mutex mu_;                                   // serializes loads
  std::optional<ModuleIndex> index_;                // guarded by mu_
  std::set<std::string, std::less<>> builtin_;      // guarded by mu_
};

}  // namespace capsule::agent::modules
