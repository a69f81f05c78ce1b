#include "agent/system/sysfs_lookup.h"

#include <dirent.h>

#include <fmt/format.h>
#include <memory>

#include "runtime/common/backoff.h"
#include "runtime/common/file_util.h"

namespace capsule::agent::system {
namespace {

std::string ScanOnce(const std::string& dir, std::string_view attribute, std::string_view value, size_t offset) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return "";
  while (dirent* e = ::readdir(d.get())) {
    std::string_view name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    Result<std::string> text = ReadFile(fmt::format("{}/{}/{}", dir, name, attribute));
    if (!text.ok()) continue;
    if (text->size() < offset) continue;
    std::string_view got = std::string_view(*text).substr(offset);
    while (!got.empty() && (got.back() == '\n' || got.back() == '\0' || got.back() == ' ')) got.remove_suffix(1);
    if (got == value) return std::string(name);
  }
  return "";
}

}  // namespace

Result<std::string> FindSysfsEntry(const std::string& dir, std::string_view attribute, std::string_view value,
                                   std::chrono::milliseconds wait, size_t value_offset) {
  std::string name;
  if (WaitUntil(
          [&] {
            name = ScanOnce(dir, attribute, value, value_offset);
            return !name.empty();
          },
          wait, {std::chrono::milliseconds(2), std::chrono::milliseconds(2)}))
    return name;
  return NotFound(fmt::format("nothing under {} has {} '{}'{}", dir, attribute, value,
                              wait.count() > 0 ? fmt::format(" within {} ms", wait.count()) : ""));
}

}  // namespace capsule::agent::system
