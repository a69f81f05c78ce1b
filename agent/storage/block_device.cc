#include "agent/storage/block_device.h"

#include <dirent.h>

#include <fmt/format.h>
#include <memory>
#include <thread>

#include "runtime/common/file_util.h"

namespace capsule::agent::storage {
namespace {

std::string Scan(std::string_view serial, const std::string& sys_block) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(sys_block.c_str()), ::closedir);
  if (!dir) return "";
  while (dirent* e = ::readdir(dir.get())) {
    std::string_view name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    Result<std::string> text = ReadFile(fmt::format("{}/{}/serial", sys_block, name));
    if (!text.ok()) continue;
    std::string_view got = *text;
    while (!got.empty() && (got.back() == '\n' || got.back() == '\0' || got.back() == ' ')) got.remove_suffix(1);
    if (got == serial) return std::string(name);
  }
  return "";
}

}  // namespace

Result<std::string> BlockDeviceBySerial(std::string_view serial, std::chrono::milliseconds wait,
                                        const std::string& sys_block, const std::string& dev_dir) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::string name = Scan(serial, sys_block);
    if (!name.empty()) return fmt::format("{}/{}", dev_dir, name);
    if (std::chrono::steady_clock::now() >= deadline)
      return NotFound(fmt::format("no block device with serial '{}' under {} within {} ms", serial, sys_block,
                                  wait.count()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace capsule::agent::storage
