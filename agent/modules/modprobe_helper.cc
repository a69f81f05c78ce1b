#include "agent/modules/modprobe_helper.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/modules/image_layout.h"
#include "agent/modules/loader.h"
#include "agent/modules/module_aliases.h"
#include "agent/modules/module_index.h"
#include "agent/modules/module_policy.h"
#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::agent::modules {
namespace {

constexpr size_t kMaxRequest = 256;

// One line in the kernel log (the helper has no console of its own).
void Kmsg(const std::string& line) {
  UniqueFd fd(::open("/dev/kmsg", O_WRONLY | O_CLOEXEC));
  if (!fd) return;
  const std::string text = "<3>capsule-modprobe: " + line.substr(0, 900) + "\n";
  (void)!::write(fd.get(), text.data(), text.size());
}

// Into PID 1's view of the filesystem: see the header.
Status EnterInitRoot() {
  if (::unshare(CLONE_NEWNS) != 0) return ErrnoStatus("unshare(CLONE_NEWNS)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return ErrnoStatus("make / private");
  ::mkdir("/proc", 0555);
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) return ErrnoStatus("mount proc");
  UniqueFd root(::open("/proc/1/root", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return ErrnoStatus("open /proc/1/root");
  if (::fchdir(root.get()) != 0) return ErrnoStatus("fchdir to PID 1's root");
  if (::chroot(".") != 0) return ErrnoStatus("chroot into PID 1's root");
  if (::chdir("/") != 0) return ErrnoStatus("chdir /");
  return Status::Ok();
}

std::string Release() {
  utsname u{};
  ::uname(&u);
  return u.release;
}

}  // namespace

bool IsModprobeHelper(std::string_view argv0) {
  const size_t slash = argv0.rfind('/');
  return argv0.substr(slash == std::string_view::npos ? 0 : slash + 1) == "capsule-modprobe";
}

Status InstallModprobeHelper() {
  auto exe = SelfExePath();
  if (!exe.ok()) return std::move(exe).status().WithContext("modprobe helper");
  const std::string& self = *exe;
  if (::mkdir("/sbin", 0755) != 0 && errno != EEXIST) return ErrnoStatus("modprobe helper: mkdir /sbin");
  ::unlink(kModprobeHelperPath);
  if (::symlink(self.c_str(), kModprobeHelperPath) != 0)
    return ErrnoStatus(fmt::format("modprobe helper: symlink {} -> {}", kModprobeHelperPath, self));
  return WriteFile("/proc/sys/kernel/modprobe", std::string(kModprobeHelperPath) + "\n")
      .WithContext("modprobe helper: /proc/sys/kernel/modprobe");
}

std::vector<std::string> ModuleTrees(std::string_view release) {
  return {fmt::format("{}/{}/{}", guest_abi::kSharedFsGuestPath, guest_abi::kSharedModulesDir, release),
          fmt::format("{}/{}", kModulesRoot, release)};
}

namespace {

// Softdeps name modules to load first, which may have softdeps of their
// own; depmod output has no cycles, but a bound keeps a bad tree finite.
constexpr int kMaxSoftdepDepth = 4;

// One module tree's index files, each read once for the whole request
// (softdeps included): modules.dep and modules.builtin by the loader,
// modules.alias and modules.softdep here, on first use.
class ModuleTree {
 public:
  explicit ModuleTree(std::string dir) : dir_(std::move(dir)), loader_(dir_) {}
  const std::string& dir() const { return dir_; }
  KernelModuleLoader& loader() { return loader_; }
  const ModuleAliases& aliases() {
    if (!aliases_) aliases_ = ModuleAliases::Parse(ReadFile(dir_ + "/modules.alias").value_or(""));
    return *aliases_;
  }
  const std::vector<std::string>& SoftdepsOf(const std::string& module) {
    if (!softdeps_) softdeps_ = ParseSoftdepPre(ReadFile(dir_ + "/modules.softdep").value_or(""));
    static const std::vector<std::string> kNone;
    auto it = softdeps_->find(module);
    return it == softdeps_->end() ? kNone : it->second;
  }

 private:
  const std::string dir_;
  KernelModuleLoader loader_;
  std::optional<ModuleAliases> aliases_;
  std::optional<std::map<std::string, std::vector<std::string>>> softdeps_;
};

// False when the tree does not know `request` (nothing was loaded then).
// PERMISSION_DENIED when `policy` allows none of the modules it names;
// softdeps (no policy) come with the module that wants them.
Result<bool> LoadFromTree(ModuleTree& tree, std::string_view request, const ModulePolicy* policy, int depth) {
  const std::string name = NormalizeModuleName(request);
  ASSIGN_OR_RETURN(bool known, tree.loader().Knows(name));
  std::vector<std::string> targets;
  if (known) {
    targets.push_back(name);
  } else {
    for (auto& m : tree.aliases().Resolve(request)) {
      ASSIGN_OR_RETURN(bool alias_known, tree.loader().Knows(m));
      if (alias_known) targets.push_back(std::move(m));
    }
  }
  if (targets.empty()) return false;
  if (policy) {
    std::vector<std::string> refused;
    std::erase_if(targets, [&](const std::string& t) {
      if (policy->Allows(t)) return false;
      refused.push_back(t);
      return true;
    });
    if (targets.empty())
      return PermissionDenied(fmt::format("modprobe: module {} (asked for as '{}') is not in the guest's allowlist; "
                                          "an operator adds it with config guest.modules_allow",
                                          fmt::join(refused, ", "), request));
  }
  Status last;
  bool any = false;
  for (const auto& target : targets) {
    for (const auto& pre : tree.SoftdepsOf(target)) {
      if (depth >= kMaxSoftdepDepth) {
        Kmsg(fmt::format("softdep {} of {} not loaded: softdeps nest more than {} deep", pre, target, kMaxSoftdepDepth));
        continue;
      }
      // Best effort, as modprobe does: the module may work without it.
      auto loaded = LoadFromTree(tree, pre, nullptr, depth + 1);
      if (!loaded.ok()) {
        Kmsg(fmt::format("{} (softdep of {})", loaded.status().message(), target));
      } else if (!*loaded) {
        Kmsg(fmt::format("modprobe: no module or alias '{}' in {} (softdep of {})", pre, tree.dir(), target));
      }
    }
    Status st = tree.loader().Load({target});
    if (st.ok()) {
      any = true;
    } else {
      last = st;
    }
  }
  if (!any) return last;
  return true;
}

}  // namespace

Status LoadModuleRequest(std::string_view request, const std::vector<std::string>& trees,
                         const ModulePolicy& policy) {
  if (request.empty() || request.size() > kMaxRequest) return InvalidArgument("modprobe: a request of bad length");
  std::vector<std::string> searched;
  for (const auto& dir : trees) {
    if (!PathExists(dir + "/" + kModulesDepFile)) continue;
    searched.push_back(dir);
    ModuleTree tree(dir);
    ASSIGN_OR_RETURN(bool loaded, LoadFromTree(tree, request, &policy, 0));
    if (loaded) return Status::Ok();
  }
  return NotFound(fmt::format("modprobe: no module or alias '{}' in {}", request,
                              searched.empty() ? std::string("any module tree") : fmt::format("{}", fmt::join(searched, ", "))));
}

void LoadNetAdminBaseline() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto trees = ModuleTrees(Release());
    for (const char* m : {"ip_tables", "ip6_tables"}) {
      if (Status st = LoadModuleRequest(m, trees, ModulePolicy::Default()); !st.ok()) Kmsg(st.message());
    }
  });
}

int RunModprobeHelper(int argc, char** argv) {
  std::vector<std::string> requests;
  bool names = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (!names && a == "--") {
      names = true;
    } else if (names || a.empty() || a.front() != '-') {
      requests.emplace_back(a);
    }
  }
  if (requests.empty()) {
    Kmsg("no module named");
    return 1;
  }
  if (Status st = EnterInitRoot(); !st.ok()) {
    Kmsg(st.message());
    return 1;
  }
  const std::vector<std::string> trees = ModuleTrees(Release());
  const ModulePolicy policy = ReadModulePolicy();
  int rc = 0;
  for (const auto& r : requests) {
    if (Status st = LoadModuleRequest(r, trees, policy); !st.ok()) {
      Kmsg(st.message());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace capsule::agent::modules
