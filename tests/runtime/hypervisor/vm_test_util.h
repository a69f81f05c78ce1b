// Helpers for tests that run real QEMU: a scratch state root, a tiny
// multiboot guest, and leak checks (no process, no file left behind).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/config/config.h"
#include "runtime/hypervisor/vm_paths.h"
#include "runtime/hypervisor/vm_spec.h"

namespace capsule::hypervisor::testing {

// Pids of live (non-zombie) processes whose command line mentions `needle`.
inline std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    auto cmd = ReadFile("/proc/" + std::string(e->d_name) + "/cmdline");
    if (!cmd.ok()) continue;
    auto stat = ReadFile("/proc/" + std::string(e->d_name) + "/stat");
    if (stat.ok()) {
      size_t close = stat->rfind(')');
      if (close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] == 'Z') continue;
    }
    for (char& c : *cmd) {
      if (c == '\0') c = ' ';
    }
    if (cmd->find(needle) != std::string::npos) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

// True when `pid` has exited (absent or a zombie awaiting its reaper).
inline bool ProcessGone(pid_t pid) {
  auto stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return true;
  size_t close = stat->rfind(')');
  return close != std::string::npos && close + 2 < stat->size() && (*stat)[close + 2] == 'Z';
}

// A multiboot (a.out kludge) image for QEMU -kernel: 32-bit code that writes
// `message` to COM1 and then triple-faults (zero-limit IDT + int3), which
// with -no-reboot ends QEMU with SHUTDOWN reason "guest-reset". Boots in
// about a second under TCG, no Linux needed.
inline std::string MultibootGuestImage(const std::string& message) {
  constexpr uint32_t kLoad = 0x100000, kMagic = 0x1BADB002, kFlags = 0x00010000;  // flags: address fields valid
  std::string code;
  for (unsigned char c : message) {
    code += std::string("\x66\xBA\xF8\x03", 4);  // mov dx, 0x3f8
    code += static_cast<char>(0xB0);             // mov al, c
    code += static_cast<char>(c);
    code += static_cast<char>(0xEE);             // out dx, al
  }
  uint32_t idt_addr = kLoad + 32 + static_cast<uint32_t>(code.size()) + 8;
  code += std::string("\x0F\x01\x1D", 3);  // lidt [idt_addr]
  code.append(reinterpret_cast<const char*>(&idt_addr), 4);
  code += static_cast<char>(0xCC);  // int3 -> #GP -> #DF -> triple fault
  uint32_t hdr[8] = {kMagic, kFlags, static_cast<uint32_t>(-(kMagic + kFlags)), kLoad, kLoad, 0, 0, kLoad + 32};
  std::string img(reinterpret_cast<const char*>(hdr), sizeof hdr);
  return img + code + std::string(8, '\0');
}

// Lists what is left under a directory (for "nothing left behind" checks).
inline std::vector<std::string> DirEntries(const std::string& dir) { return ListDir(dir); }

}  // namespace capsule::hypervisor::testing
