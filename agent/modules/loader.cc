// finit_module(2) on each .ko in dependency order. EEXIST means someone (an
// earlier request, or the kernel's own autoload) loaded it already.
#include "agent/modules/loader.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "agent/modules/image_layout.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::modules {
namespace {

const log::Logger kLoaderLog("modules");


}  // namespace

std::string KernelModuleLoader::DefaultDir() {
  utsname u{};
  ::uname(&u);
  return fmt::format("{}/{}", kModulesRoot, u.release);
}

Status KernelModuleLoader::EnsureIndex() {
  if (index_) return Status::Ok();
  std::string dep_path = dir_ + "/" + kModulesDepFile;
  ASSIGN_OR_RETURN(std::string dep_text, ReadFile(dep_path));
  ASSIGN_OR_RETURN(ModuleIndex index, ModuleIndex::Parse(dep_text, dep_path));
  // Without modules.builtin, a built-in module just looks missing.
  auto builtin_text = ReadFile(dir_ + "/" + kModulesBuiltinFile);
  if (builtin_text.ok()) builtin_ = ParseBuiltinModules(*builtin_text);
  index_ = std::move(index);
  return Status::Ok();
}

Result<LoadOutcome> KernelModuleLoader::LoadFile(const std::string& rel_path) {
  std::string name = ModuleNameFromPath(rel_path);
  if (builtin_.count(name) != 0) return LoadOutcome::kBuiltin;
  std::string path = dir_ + "/" + rel_path;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus(fmt::format("load module {}: open {}", name, path));
  if (::syscall(SYS_finit_module, fd.get(), "", 0) != 0) {
    if (errno == EEXIST) return LoadOutcome::kAlreadyLoaded;
    return ErrnoStatus(fmt::format("load module {}: finit_module {}", name, path));
  }
  return LoadOutcome::kLoaded;
}

Result<bool> KernelModuleLoader::Knows(std::string_view name) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(EnsureIndex());
  const std::string n = NormalizeModuleName(name);
  return index_->Contains(n) || builtin_.count(n) != 0;
}

Status KernelModuleLoader::Load(const std::vector<std::string>& names) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(EnsureIndex());
  std::vector<std::string> wanted;
  for (const auto& n : names) {
    if (builtin_.count(NormalizeModuleName(n)) == 0) wanted.push_back(n);
  }
  ASSIGN_OR_RETURN(auto order, index_->LoadOrder(wanted));
  for (const auto& rel : order) {
    ASSIGN_OR_RETURN(LoadOutcome outcome, LoadFile(rel));
    if (outcome == LoadOutcome::kLoaded) kLoaderLog.Info("loaded module {}", ModuleNameFromPath(rel));
  }
  return Status::Ok();
}

Result<BootLoadReport> KernelModuleLoader::LoadBootSet() {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(EnsureIndex());
  std::string order_path = dir_ + "/" + kBootOrderFile;
  ASSIGN_OR_RETURN(std::string order_text, ReadFile(order_path));
  BootLoadReport report;
  for (const auto& rel : ModuleFileLines(order_text)) {
    std::string name = ModuleNameFromPath(rel);
    auto outcome = LoadFile(rel);
    if (!outcome.ok()) {
      kLoaderLog.Error("{}", outcome.status().message());
      report.failed.push_back(std::move(outcome).status());
      continue;
    }
    switch (*outcome) {
      case LoadOutcome::kLoaded:
        kLoaderLog.Info("loaded module {}", name);
        report.loaded.push_back(name);
        break;
      case LoadOutcome::kAlreadyLoaded:
        kLoaderLog.Info("module {} already loaded", name);
        report.already_loaded.push_back(name);
        break;
      case LoadOutcome::kBuiltin:
        kLoaderLog.Debug("module {} is built in", name);
        report.builtin.push_back(name);
        break;
    }
  }
  return report;
}

}  // namespace capsule::agent::modules
