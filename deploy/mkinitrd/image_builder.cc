// Collects the image's files into a CpioArchive. Library files are stored at
// the path ldd printed (the loader at its PT_INTERP path) with the content
// of the file the path resolves to on the build host, so the image needs no
// symlinks and no ld.so.cache: the loader's built-in multiarch directories
// find them.
#include "deploy/mkinitrd/image_builder.h"

#include <dirent.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>

#include "agent/modules/image_layout.h"
#include "agent/modules/module_index.h"
#include "deploy/mkinitrd/tools.h"
#include "runtime/common/file_util.h"

namespace capsule::deploy {
namespace {

constexpr uint32_t kConsoleMajor = 5, kConsoleMinor = 1;  // /dev/console, from devices.txt

// Names in `dir` starting with `prefix`.
std::vector<std::string> ListPrefixed(const std::string& dir, std::string_view prefix) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name);
  }
  ::closedir(d);
  return out;
}

Result<std::string> ReadResolved(const std::string& path) {
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr) return ErrnoStatus("resolve " + path);
  return ReadFile(real);
}

Status AddLibraries(const std::string& binary, CpioArchive& archive, ImageReport& report) {
  ASSIGN_OR_RETURN(std::string ldd, FindProgram("ldd", "libc-bin"));
  ASSIGN_OR_RETURN(std::string out, RunCapture({ldd, binary}));
  ASSIGN_OR_RETURN(auto libs, ParseLddOutput(out));
  for (const auto& lib : libs) {
    ASSIGN_OR_RETURN(std::string data, ReadResolved(lib));
    RETURN_IF_ERROR(archive.AddFile(lib, std::move(data), 0755));
    report.libraries.push_back(lib);
  }
  return Status::Ok();
}

Status AddModules(const ImageInputs& in, CpioArchive& archive, ImageReport& report) {
  using agent::modules::ModuleIndex;
  const std::string& src = in.kernel.modules_dir;
  const std::string dst = fmt::format("{}/{}", agent::modules::kModulesRoot, in.kernel.release);
  ASSIGN_OR_RETURN(std::string dep_text, ReadFile(src + "/modules.dep"));
  ASSIGN_OR_RETURN(ModuleIndex index, ModuleIndex::Parse(dep_text, src + "/modules.dep"));
  ASSIGN_OR_RETURN(auto order, index.LoadOrder(in.modules));
  std::vector<std::string> everything = in.modules;
  everything.insert(everything.end(), in.optional_modules.begin(), in.optional_modules.end());
  ASSIGN_OR_RETURN(auto shipped, index.LoadOrder(everything));  // boot set first, then the rest
  for (const auto& rel : shipped) {
    ASSIGN_OR_RETURN(std::string ko, ReadFile(src + "/" + rel));
    RETURN_IF_ERROR(archive.AddFile(dst + "/" + rel, std::move(ko), 0644));
  }
  std::string order_text = "# capsule-agent loads these at boot, in this order (written by capsule-mkinitrd)\n";
  for (const auto& rel : order) {
    order_text += rel + "\n";
    report.modules.push_back(agent::modules::ModuleNameFromPath(rel));
  }
  report.optional_modules = shipped.size() - order.size();
  RETURN_IF_ERROR(archive.AddFile(dst + "/" + agent::modules::kBootOrderFile, order_text, 0644));
  RETURN_IF_ERROR(archive.AddFile(dst + "/" + agent::modules::kModulesDepFile, index.Subset(shipped), 0644));
  ASSIGN_OR_RETURN(std::string builtin, ReadFile(src + "/modules.builtin"));
  return archive.AddFile(dst + "/" + agent::modules::kModulesBuiltinFile, std::move(builtin), 0644);
}

Status AddBusybox(const std::string& busybox, CpioArchive& archive, ImageReport& report) {
  ASSIGN_OR_RETURN(std::string data, ReadResolved(busybox));
  RETURN_IF_ERROR(archive.AddFile("/bin/busybox", std::move(data), 0755));
  ASSIGN_OR_RETURN(std::string list, RunCapture({busybox, "--list-full"}));
  size_t start = 0;
  while (start < list.size()) {
    size_t nl = list.find('\n', start);
    if (nl == std::string::npos) nl = list.size();
    std::string applet = list.substr(start, nl - start);
    start = nl + 1;
    // "linuxrc" and anything at the top level would shadow the image's own files.
    if (applet.empty() || applet.find('/') == std::string::npos || archive.Contains(applet)) continue;
    RETURN_IF_ERROR(archive.AddSymlink(applet, "/bin/busybox"));
    ++report.busybox_applets;
  }
  return Status::Ok();
}

}  // namespace

Result<KernelTree> FindKernel(const std::string& dir) {
  const std::string hint =
      fmt::format("guest kernel not found in {}: run `make deps` (deploy/fetch-guest-kernel.sh)", dir);
  auto releases = ListPrefixed(dir + "/lib/modules", "");
  std::erase_if(releases, [](const std::string& n) { return n == "." || n == ".."; });
  if (releases.size() != 1) return FailedPrecondition(hint);
  KernelTree k;
  k.release = releases.front();
  k.vmlinuz = fmt::format("{}/boot/vmlinuz-{}", dir, k.release);
  k.modules_dir = fmt::format("{}/lib/modules/{}", dir, k.release);
  if (!PathExists(k.vmlinuz) || !PathExists(k.modules_dir + "/modules.dep")) return FailedPrecondition(hint);
  k.description = ReadFile(dir + "/capsule-kernel.env").value_or("KERNEL_RELEASE=" + k.release + "\n");
  return k;
}

Result<std::vector<std::string>> ParseLddOutput(std::string_view output) {
  std::vector<std::string> libs;
  size_t start = 0;
  while (start < output.size()) {
    size_t nl = output.find('\n', start);
    if (nl == std::string_view::npos) nl = output.size();
    std::string_view line = output.substr(start, nl - start);
    start = nl + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty()) continue;
    size_t arrow = line.find(" => ");
    std::string_view path = arrow == std::string_view::npos ? line : line.substr(arrow + 4);
    if (path.rfind("not found", 0) == 0) {
      return NotFound(fmt::format("ldd: library {} not found", line.substr(0, arrow)));
    }
    path = path.substr(0, path.find(" ("));
    if (path.empty() || path.front() != '/') continue;  // linux-vdso.so.1 and friends
    libs.emplace_back(path);
  }
  if (libs.empty()) return InvalidArgument("ldd printed no libraries (is the agent statically linked?)");
  return libs;
}

Result<ImageReport> BuildImage(const ImageInputs& in, CpioArchive& archive) {
  ImageReport report;
  ASSIGN_OR_RETURN(std::string agent, ReadFile(in.agent));
  RETURN_IF_ERROR(archive.AddFile("/init", std::move(agent), 0755));
  RETURN_IF_ERROR_CTX(AddLibraries(in.agent, archive, report), "shared libraries of " + in.agent);
  RETURN_IF_ERROR_CTX(AddModules(in, archive, report), "kernel modules");
  for (const char* dir : {"/proc", "/sys", "/run", "/etc", "/root"}) RETURN_IF_ERROR(archive.AddDirectory(dir, 0755));
  RETURN_IF_ERROR(archive.AddDirectory("/tmp", 01777));
  RETURN_IF_ERROR(archive.AddDirectory("/dev", 0755));
  RETURN_IF_ERROR(archive.AddCharDevice("/dev/console", 0600, kConsoleMajor, kConsoleMinor));
  if (!in.busybox.empty()) RETURN_IF_ERROR_CTX(AddBusybox(in.busybox, archive, report), "busybox");
  std::string about = in.kernel.description + fmt::format("MODULES={}\nDEBUG={}\n", fmt::join(report.modules, ","),
                                                          in.busybox.empty() ? 0 : 1);
  RETURN_IF_ERROR(archive.AddFile("/etc/capsule-image", std::move(about), 0644));
  return report;
}

}  // namespace capsule::deploy
