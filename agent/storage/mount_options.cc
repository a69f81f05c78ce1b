// The table of option words mount(8) turns into MS_* flags; "noX" words clear
// what "X" sets, so later words win as in mount(8).
#include "agent/storage/mount_options.h"

#include <fmt/format.h>
#include <sys/mount.h>

#include <map>

namespace capsule::agent::storage {
namespace {

constexpr size_t kMaxDataBytes = 4096;  // mount(2) copies at most one page of data

struct FlagWord {
  bool clear;  // true: the word removes `flag`
  unsigned long flag;
};

const std::map<std::string, FlagWord, std::less<>>& FlagWords() {
  static const std::map<std::string, FlagWord, std::less<>> words{
      {"defaults", {false, 0}},
      {"ro", {false, MS_RDONLY}},          {"rw", {true, MS_RDONLY}},
      {"nosuid", {false, MS_NOSUID}},      {"suid", {true, MS_NOSUID}},
      {"nodev", {false, MS_NODEV}},        {"dev", {true, MS_NODEV}},
      {"noexec", {false, MS_NOEXEC}},      {"exec", {true, MS_NOEXEC}},
      {"sync", {false, MS_SYNCHRONOUS}},   {"async", {true, MS_SYNCHRONOUS}},
      {"dirsync", {false, MS_DIRSYNC}},    {"mand", {false, MS_MANDLOCK}},
      {"nomand", {true, MS_MANDLOCK}},     {"noatime", {false, MS_NOATIME}},
      {"atime", {true, MS_NOATIME}},       {"nodiratime", {false, MS_NODIRATIME}},
      {"diratime", {true, MS_NODIRATIME}}, {"relatime", {false, MS_RELATIME}},
      {"norelatime", {true, MS_RELATIME}}, {"strictatime", {false, MS_STRICTATIME}},
      {"nostrictatime", {true, MS_STRICTATIME}}, {"lazytime", {false, MS_LAZYTIME}},
      {"nolazytime", {true, MS_LAZYTIME}}, {"silent", {false, MS_SILENT}},
      {"loud", {true, MS_SILENT}},         {"bind", {false, MS_BIND}},
      {"rbind", {false, MS_BIND | MS_REC}},
  };
  return words;
}

const std::map<std::string, unsigned long, std::less<>>& PropagationWords() {
  static const std::map<std::string, unsigned long, std::less<>> words{
      {"shared", MS_SHARED},         {"rshared", MS_SHARED | MS_REC},
      {"slave", MS_SLAVE},           {"rslave", MS_SLAVE | MS_REC},
      {"private", MS_PRIVATE},       {"rprivate", MS_PRIVATE | MS_REC},
      {"unbindable", MS_UNBINDABLE}, {"runbindable", MS_UNBINDABLE | MS_REC},
  };
  return words;
}

Status ApplyWord(std::string_view word, MountOptions& out) {
  if (word.empty()) return InvalidArgument("empty mount option");
  if (word.find('\0') != std::string_view::npos) return InvalidArgument("mount option contains a NUL byte");
  if (auto it = FlagWords().find(word); it != FlagWords().end()) {
    if (it->second.clear) {
      out.flags &= ~it->second.flag;
    } else {
      out.flags |= it->second.flag;
    }
    return Status::Ok();
  }
  if (auto it = PropagationWords().find(word); it != PropagationWords().end()) {
    out.propagation = it->second;
    return Status::Ok();
  }
  if (!out.data.empty()) out.data.push_back(',');
  out.data.append(word);
  return Status::Ok();
}

}  // namespace

Result<MountOptions> ParseMountOptions(const std::vector<std::string>& options) {
  MountOptions out;
  for (const auto& element : options) {
    std::string_view rest = element;
    for (;;) {
      size_t comma = rest.find(',');
      std::string_view word = rest.substr(0, comma);
      Status st = ApplyWord(word, out);
      if (!st.ok()) return std::move(st).WithContext(fmt::format("mount options '{}'", element));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (out.data.size() >= kMaxDataBytes) {
    return InvalidArgument(fmt::format("mount data is {} bytes, at most {}", out.data.size(), kMaxDataBytes - 1));
  }
  return out;
}

}  // namespace capsule::agent::storage
