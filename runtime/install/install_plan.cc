// The file list of an install (see install_plan.h). The shim finds
// capsule-vsockd beside its own executable and the guest image through
// config.yaml, so they travel together; virtiofsd and QEMU come from the
// node's distribution (capsule-runtime check reports them).
#include "runtime/install/install_plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string_view>

#include "runtime/common/file_util.h"

namespace capsule::install {
namespace {

struct Entry {
  std::string_view rel;  // under the install tree's prefix
  bool executable;
  bool optional;
};

// Binaries from the CMake install() rules; the guest image and default
// config from deploy/CMakeLists.txt (share/capsule).
constexpr Entry kEntries[] = {
    {"bin/containerd-shim-capsule-v2", true, false},
    {"bin/capsule-shimd", true, false},  // beside the shim: it runs it
    {"bin/capsule-runtime", true, false},
    {"bin/capsule-vsockd", true, false},
    {"bin/capsule-poold", true, true},
    {"share/capsule/capsule-initrd.img", false, false},
    {"share/capsule/vmlinux", false, true},
    {"share/capsule/vmlinuz", false, true},
};

}  // namespace

Result<std::vector<PlannedFile>> PlanFiles(const std::string& from, const InstallLayout& layout) {
  std::vector<PlannedFile> out;
  std::string missing;
  auto present = [](const std::string& p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  };
  for (const Entry& e : kEntries) {
    std::string src = from + "/" + std::string(e.rel);
    if (!present(src)) {
      if (!e.optional) missing += (missing.empty() ? "" : ", ") + src;
      continue;
    }
    out.push_back({src, layout.prefix + "/" + std::string(e.rel), static_cast<mode_t>(e.executable ? 0755 : 0644),
                   false});
  }
  // The guest kernel's module tree (config guest.modules), file by file so
  // the manifest names each; optional: without it guests load only their
  // image's own modules.
  const std::filesystem::path modules = from + "/share/capsule/modules";
  std::error_code ec;
  if (std::filesystem::is_directory(modules, ec)) {
    std::vector<std::string> rels;
    for (auto it = std::filesystem::recursive_directory_iterator(modules, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec) && !it->is_symlink(ec))
        rels.push_back(std::filesystem::relative(it->path(), from, ec).string());
    }
    if (ec) return Internal("install tree " + modules.string() + ": " + ec.message());
    std::sort(rels.begin(), rels.end());
    for (const auto& rel : rels) out.push_back({from + "/" + rel, layout.prefix + "/" + rel, 0644, false});
  }
  std::string config = from + "/share/capsule/config.yaml";
  if (present(config)) {
    out.push_back({config, layout.capsule_config, 0644, true});
  } else {
    missing += (missing.empty() ? "" : ", ") + config;
  }
  if (!present(from + "/share/capsule/vmlinux") && !present(from + "/share/capsule/vmlinuz")) {
    missing += (missing.empty() ? "" : ", ") + from + "/share/capsule/vmlinux (or vmlinuz)";
  }
  if (!missing.empty()) return NotFound("install tree " + from + " lacks " + missing);
  return out;
}

Result<std::string> DefaultFromDir() {
  ASSIGN_OR_RETURN(std::string dir, SelfExePath());
  dir.resize(dir.rfind('/'));  // .../bin
  size_t slash = dir.rfind('/');
  if (slash == std::string::npos || slash == 0) return std::string("/");
  dir.resize(slash);
  return dir;
}

}  // namespace capsule::install
