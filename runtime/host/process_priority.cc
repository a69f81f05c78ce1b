// See process_priority.h.
#include "runtime/host/process_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "runtime/common/file_util.h"

namespace capsule {

Status SetThreadNice(int nice) {
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  if (::setpriority(PRIO_PROCESS, tid, nice) != 0) return ErrnoStatus("setpriority of thread " + std::to_string(tid));
  return Status::Ok();
}

Status SetProcessesNice(const std::vector<pid_t>& pids, int nice) {
  for (pid_t pid : pids) {
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    for (const std::string& name : ListDir(tasks)) {
      char* end = nullptr;
      const unsigned long tid = std::strtoul(name.c_str(), &end, 10);
      if (end == name.c_str() || *end != '\0') continue;
      if (::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) != 0 && errno != ESRCH)
        return ErrnoStatus("setpriority of thread " + name + " of process " + std::to_string(pid));
    }
  }
  return Status::Ok();
}

}  // namespace capsule
