// See mount_options.h. The words follow mount(8); "noX" clears what "X" sets.
#include "runtime/common/mount_options.h"

#include <sys/mount.h>

#include <array>

namespace capsule {
namespace {

struct FlagWord {
  std::string_view word;
  bool clear;  // "rw" clears MS_RDONLY
  unsigned long flag;
};

constexpr std::array<FlagWord, 29> kFlagWords = {{
    {"defaults", false, 0},
    {"ro", false, MS_RDONLY},
    {"rw", true, MS_RDONLY},
    {"suid", true, MS_NOSUID},
    {"nosuid", false, MS_NOSUID},
    {"dev", true, MS_NODEV},
    {"nodev", false, MS_NODEV},
    {"exec", true, MS_NOEXEC},
    {"noexec", false, MS_NOEXEC},
    {"sync", false, MS_SYNCHRONOUS},
    {"async", true, MS_SYNCHRONOUS},
    {"dirsync", false, MS_DIRSYNC},
    {"remount", false, MS_REMOUNT},
    {"mand", false, MS_MANDLOCK},
    {"nomand", true, MS_MANDLOCK},
    {"atime", true, MS_NOATIME},
    {"noatime", false, MS_NOATIME},
    {"diratime", true, MS_NODIRATIME},
    {"nodiratime", false, MS_NODIRATIME},
    {"relatime", false, MS_RELATIME},
    {"norelatime", true, MS_RELATIME},
    {"strictatime", false, MS_STRICTATIME},
    {"nostrictatime", true, MS_STRICTATIME},
    {"lazytime", false, MS_LAZYTIME},
    {"nolazytime", true, MS_LAZYTIME},
    {"silent", false, MS_SILENT},
    {"loud", true, MS_SILENT},
    {"bind", false, MS_BIND},
    {"rbind", false, MS_BIND | MS_REC},
}};

struct PropagationWord {
  std::string_view word;
  unsigned long flags;
};

constexpr std::array<PropagationWord, 8> kPropagationWords = {{
    {"private", MS_PRIVATE},
    {"rprivate", MS_PRIVATE | MS_REC},
    {"shared", MS_SHARED},
    {"rshared", MS_SHARED | MS_REC},
    {"slave", MS_SLAVE},
    {"rslave", MS_SLAVE | MS_REC},
    {"unbindable", MS_UNBINDABLE},
    {"runbindable", MS_UNBINDABLE | MS_REC},
}};

Status ApplyWord(std::string_view word, MountOptions& out) {
  if (word.empty()) return InvalidArgument("empty mount option");
  if (word.find('\0') != std::string_view::npos) return InvalidArgument("mount option contains a NUL byte");
  for (const FlagWord& f : kFlagWords) {
    if (f.word != word) continue;
    if (f.clear) {
      out.flags &= ~f.flag;
    } else {
      out.flags |= f.flag;
    }
    return Status::Ok();
  }
  if (unsigned long p = PropagationFlags(word)) {
    out.propagation.push_back(p);
    return Status::Ok();
  }
  if (!out.data.empty()) out.data.push_back(',');
  out.data.append(word);
  return Status::Ok();
}

}  // namespace

bool MountOptions::bind() const { return (flags & MS_BIND) != 0; }

unsigned long MountOptions::bind_remount_flags() const {
  return flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME |
                  MS_STRICTATIME);
}

unsigned long PropagationFlags(std::string_view name) {
  for (const PropagationWord& p : kPropagationWords) {
    if (p.word == name) return p.flags;
  }
  return 0;
}

Result<MountOptions> ParseMountOptions(std::string_view type, const std::vector<std::string>& options) {
  MountOptions out;
  if (type == "bind") out.flags |= MS_BIND;
  for (const std::string& element : options) {
    std::string_view rest = element;
    for (;;) {
      const size_t comma = rest.find(',');
      Status st = ApplyWord(rest.substr(0, comma), out);
      if (!st.ok()) return std::move(st).WithContext("mount options '" + element + "'");
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (out.data.size() > kMaxMountDataBytes) {
    return InvalidArgument("mount data is " + std::to_string(out.data.size()) + " bytes, at most " +
                           std::to_string(kMaxMountDataBytes));
  }
  return out;
}

}  // namespace capsule
