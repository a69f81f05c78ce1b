// Flag tables follow mount(8)'s option names.
#include "agent/engine/mount_options.h"

#include <sys/mount.h>
#include <sys/statvfs.h>

#include <array>

namespace capsule::engine {
namespace {

struct FlagName {
  std::string_view name;
  bool clear;  // "rw" clears MS_RDONLY
  unsigned long flag;
};

constexpr std::array<FlagName, 26> kFlags = {{
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
    {"bind", false, MS_BIND},
    {"rbind", false, MS_BIND | MS_REC},
    {"silent", false, MS_SILENT},
}};

struct PropagationName {
  std::string_view name;
  unsigned long flags;
};

constexpr std::array<PropagationName, 8> kPropagation = {{
    {"private", MS_PRIVATE},
    {"rprivate", MS_PRIVATE | MS_REC},
    {"shared", MS_SHARED},
    {"rshared", MS_SHARED | MS_REC},
    {"slave", MS_SLAVE},
    {"rslave", MS_SLAVE | MS_REC},
    {"unbindable", MS_UNBINDABLE},
    {"runbindable", MS_UNBINDABLE | MS_REC},
}};

}  // namespace

bool MountOptions::bind() const { return (flags & MS_BIND) != 0; }

unsigned long MountOptions::bind_remount_flags() const {
  return flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME |
                  MS_RELATIME | MS_STRICTATIME);
}

unsigned long PropagationFlags(std::string_view name) {
  for (const auto& p : kPropagation) {
    if (p.name == name) return p.flags;
  }
  return 0;
}

MountOptions ParseMountOptions(std::string_view type, const std::vector<std::string>& options) {
  MountOptions out;
  if (type == "bind") out.flags |= MS_BIND;
  for (const std::string& opt : options) {
    if (unsigned long p = PropagationFlags(opt)) {
      out.propagation.push_back(p);
      continue;
    }
    bool known = false;
    for (const auto& f : kFlags) {
      if (f.name != opt) continue;
      known = true;
      if (f.clear) {
        out.flags &= ~f.flag;
      } else {
        out.flags |= f.flag;
      }
    }
    if (!known) {
      if (!out.data.empty()) out.data += ",";
      out.data += opt;
    }
  }
  return out;
}

unsigned long PreservedFlags(const std::string& path) {
  struct statvfs sv{};
  if (::statvfs(path.c_str(), &sv) != 0) return 0;
  unsigned long f = 0;
  if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
  if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
  return f;
}

}  // namespace capsule::engine
