// See process_cgroup.h.
#include "runtime/host/process_cgroup.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/mount_table.h"

namespace capsule {
namespace {

const log::Logger kProcessCgroupLog("cgroup");

// The hierarchies to join: the unified (v2) root itself, or every v1
// controller mount (and a hybrid host's v2 "unified" one) below the root.
std::vector<std::string> Hierarchies(const std::string& root) {
  if (PathExists(root + "/cgroup.controllers")) return {root};
  std::vector<std::string> out;
  auto table = ReadMountTable();
  if (!table.ok()) return out;
  for (const MountEntry& m : *table) {
    if (m.mount_point.rfind(root + "/", 0) != 0) continue;
    // name=systemd is a bookkeeping hierarchy without controllers.
    if ((m.fstype == "cgroup" && m.super_options.find("name=") == std::string::npos) || m.fstype == "cgroup2")
      out.push_back(m.mount_point);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The pid, then its descendants (virtiofsd forks its sandboxed worker).
void WithChildren(pid_t pid, std::vector<pid_t>& out, int depth = 0) {
  out.push_back(pid);
  if (depth > 4) return;
  auto kids = ReadFile(fmt::format("/proc/{}/task/{}/children", pid, pid));
  if (!kids.ok()) return;
  std::istringstream in(*kids);
  for (pid_t c; in >> c;) WithChildren(c, out, depth + 1);
}

// A new v1 cpuset cgroup has no CPUs or memory nodes until given its parent's.
Status InheritCpuset(const std::string& dir) {
  for (const char* f : {"cpuset.cpus", "cpuset.mems"}) {
    const std::string mine = dir + "/" + f;
    if (!PathExists(mine)) return Status::Ok();
    auto cur = ReadFile(mine);
    if (cur.ok() && cur->find_first_not_of(" \n") != std::string::npos) continue;
    ASSIGN_OR_RETURN(std::string parent, ReadFile(dir.substr(0, dir.rfind('/')) + "/" + f));
    RETURN_IF_ERROR(WriteFile(mine, parent));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ProcessCgroup>> ProcessCgroup::Join(const std::string& path, const std::vector<pid_t>& pids,
                                                   const std::string& root) {
  if (path.empty() || path[0] != '/')
    return InvalidArgument(fmt::format(
        "linux.cgroupsPath '{}' is not an absolute cgroupfs path (the systemd cgroup driver's slice:prefix:name form "
        "is not supported)",
        path));
  if (path.find("/../") != std::string::npos || (path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0))
    return InvalidArgument("linux.cgroupsPath '" + path + "' climbs out with '..'");
  std::vector<pid_t> all;
  for (pid_t p : pids)
    if (p > 0) WithChildren(p, all);
  std::unique_ptr<ProcessCgroup> cg(new ProcessCgroup());
  for (const std::string& h : Hierarchies(root)) {
    // mkdir -p, remembering what we made.
    std::string dir = h;
    for (size_t at = 1; at <= path.size();) {
      size_t next = path.find('/', at);
      if (next == std::string::npos) next = path.size();
      if (next > at) {
        dir += "/" + path.substr(at, next - at);
        if (::mkdir(dir.c_str(), 0755) == 0) {
          cg->created_.push_back(dir);
          if (Status st = InheritCpuset(dir); !st.ok()) return st.WithContext("cgroup " + dir);
        } else if (errno != EEXIST) {
          return ErrnoStatus("create cgroup " + dir);
        }
      }
      at = next + 1;
    }
    for (pid_t p : all) {
      Status st = WriteFile(dir + "/cgroup.procs", std::to_string(p));
      // A process that exited meanwhile (ESRCH) is not an error.
      if (!st.ok() && PathExists(fmt::format("/proc/{}", p))) return st.WithContext(fmt::format("move pid {}", p));
    }
    cg->dirs_.push_back(dir);
  }
  kProcessCgroupLog.Info("VM processes {} moved into cgroup {} ({} hierarchies)", fmt::join(all, ","), path,
                         cg->dirs_.size());
  return cg;
}

ProcessCgroup::~ProcessCgroup() { Remove(); }

void ProcessCgroup::RemoveOwnDirs() {
  Remove();
  for (const std::string& d : dirs_) {
    if (::rmdir(d.c_str()) != 0 && errno != ENOENT)
      kProcessCgroupLog.Debug("{}", ErrnoStatus("remove cgroup " + d).ToString());
  }
}

Status ProcessCgroup::SetCpuWeight(uint32_t weight) {
  if (weight < 1 || weight > 10000) return InvalidArgument(fmt::format("cpu weight {} is not in 1-10000", weight));
  bool set = false;
  for (const std::string& dir : dirs_) {
    if (PathExists(dir + "/cpu.weight")) {
      RETURN_IF_ERROR(WriteFile(dir + "/cpu.weight", std::to_string(weight)));
      set = true;
    } else if (PathExists(dir + "/cpu.shares")) {
      RETURN_IF_ERROR(WriteFile(dir + "/cpu.shares", std::to_string(uint64_t{weight} * 1024 / 100)));
      set = true;
    }
  }
  if (!set) return NotFound("no cpu controller in " + fmt::format("{}", fmt::join(dirs_, ", ")));
  return Status::Ok();
}

void ProcessCgroup::Remove() {
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    // EBUSY: a parent another pod still uses, or a process not gone yet.
    if (::rmdir(it->c_str()) != 0 && errno != ENOENT)
      kProcessCgroupLog.Debug("{}", ErrnoStatus("remove cgroup " + *it).ToString());
  }
  created_.clear();
}

}  // namespace capsule
