// cgroup v2 files: limits (cpu.max, cpu.weight, memory.max, memory.low,
// memory.swap.max, pids.max, io.weight, io.max, hugetlb.*.max, unified),
// membership (cgroup.procs), cgroup.freeze + cgroup.events, cgroup.kill,
// and stats (cpu.stat, memory.*, pids.*, io.stat).
#include "agent/engine/cgroup2.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <algorithm>
#include <sstream>

#include "agent/engine/cgroup_stats.h"
#include "runtime/common/backoff.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"

namespace capsule::engine {
namespace {

const log::Logger kCgroup2Log("engine.cgroup");

// Writes without O_CREAT: a missing interface file means a missing controller.
Status WriteCgroupFile(const std::string& dir, const std::string& file, const std::string& value) {
  const std::string path = dir + "/" + file;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      return FailedPrecondition("write " + path + ": no such file (controller \"" +
                                file.substr(0, file.find('.')) + "\" not enabled for this cgroup)");
    }
    return ErrnoStatus("open " + path);
  }
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoStatus("write \"" + value + "\" to " + path);
  return Status::Ok();
}

std::optional<std::string> ReadIfExists(const std::string& path) {
  auto r = ReadFile(path);
  if (!r.ok()) return std::nullopt;
  return std::move(*r);
}

std::vector<std::string> SplitWords(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

class Cgroup2 : public Cgroup {
 public:
  Cgroup2(std::string path, std::vector<std::string> created_parents)
      : path_(std::move(path)), created_parents_(std::move(created_parents)) {}

  const std::string& path() const override { return path_; }
  Status Apply(const oci::LinuxResources& r) override;
  Result<UniqueFd> OpenProcs() override;
  Status AddProcess(pid_t pid) override;
  Result<std::vector<pid_t>> Pids() override;
  Status SignalAll(int signal) override;
  Status Freeze(bool frozen, std::chrono::milliseconds timeout) override;
  Result<CgroupMetrics> Stats() override;
  uint64_t OomKillCount() override;
  std::string MemoryEventsPath() const override;
  Status Destroy(std::chrono::milliseconds timeout) override;

 private:
  Status ApplyCpu(const oci::LinuxCpu& cpu);
  Status ApplyMemory(const oci::LinuxMemory& mem);
  Status ApplyBlockIO(const oci::LinuxBlockIO& io);
  Status Write(const std::string& file, const std::string& value) {
    return WriteCgroupFile(path_, file, value);
  }
  // Waits until cgroup.events has `key` == want.
  Status WaitEvent(const std::string& key, uint64_t want, std::chrono::milliseconds timeout);

  std::string path_;
  std::vector<std::string> created_parents_;  // deepest first, removed if empty
};

Status Cgroup2::ApplyCpu(const oci::LinuxCpu& cpu) {
  if (cpu.shares) RETURN_IF_ERROR(Write("cpu.weight", std::to_string(SharesToWeight(*cpu.shares))));
  if (cpu.quota || cpu.period) {
    std::string quota = cpu.quota && *cpu.quota > 0 ? std::to_string(*cpu.quota) : "max";
    std::string value = cpu.period ? quota + " " + std::to_string(*cpu.period) : quota;
    RETURN_IF_ERROR(Write("cpu.max", value));
  }
  if (cpu.burst) RETURN_IF_ERROR(Write("cpu.max.burst", std::to_string(*cpu.burst)));
  if (cpu.idle) RETURN_IF_ERROR(Write("cpu.idle", std::to_string(*cpu.idle)));
  if (!cpu.cpus.empty()) RETURN_IF_ERROR(Write("cpuset.cpus", cpu.cpus));
  if (!cpu.mems.empty()) RETURN_IF_ERROR(Write("cpuset.mems", cpu.mems));
  if (cpu.realtime_runtime || cpu.realtime_period)
    kCgroup2Log.Warn("cgroup {}: cpu realtime limits have no cgroup v2 file; ignored", path_);
  return Status::Ok();
}

Status Cgroup2::ApplyMemory(const oci::LinuxMemory& mem) {
  if (mem.reservation) RETURN_IF_ERROR(Write("memory.low", LimitString(*mem.reservation)));
  if (mem.limit) RETURN_IF_ERROR(Write("memory.max", LimitString(*mem.limit)));
  if (mem.swap) {
    // OCI's swap is memory+swap; v2's memory.swap.max is swap alone.
    std::string swap;
    if (*mem.swap < 0) {
      swap = "max";
    } else if (mem.limit && *mem.limit > 0) {
      if (*mem.swap < *mem.limit)
        return InvalidArgument("memory.swap (" + std::to_string(*mem.swap) + ") is below memory.limit");
      swap = std::to_string(*mem.swap - *mem.limit);
    } else {
      return InvalidArgument("memory.swap needs memory.limit on cgroup v2");
    }
    bool has_swap = PathExists(path_ + "/memory.swap.max");
    if (has_swap) {
      RETURN_IF_ERROR(Write("memory.swap.max", swap));
    } else if (swap != "max" && swap != "0") {
      return FailedPrecondition("cgroup " + path_ + ": swap limit requested but the kernel has no swap accounting");
    }
  }
  if (mem.swappiness || mem.kernel || mem.kernel_tcp || mem.disable_oom_killer)
    kCgroup2Log.Debug("cgroup {}: swappiness/kernel/kernelTCP/disableOOMKiller have no v2 file; ignored", path_);
  return Status::Ok();
}

Status Cgroup2::ApplyBlockIO(const oci::LinuxBlockIO& io) {
  if (io.weight) RETURN_IF_ERROR(Write("io.weight", "default " + std::to_string(BlkioWeightToIoWeight(*io.weight))));
  for (const auto& d : io.weight_device) {
    if (!d.weight) continue;
    RETURN_IF_ERROR(Write("io.weight", std::to_string(d.major) + ":" + std::to_string(d.minor) + " " +
                                           std::to_string(BlkioWeightToIoWeight(*d.weight))));
  }
  auto throttle = [&](const std::vector<oci::LinuxThrottleDevice>& list, const char* key) -> Status {
    for (const auto& d : list) {
      RETURN_IF_ERROR(Write("io.max", std::to_string(d.major) + ":" + std::to_string(d.minor) + " " + key +
                                          "=" + std::to_string(d.rate)));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(throttle(io.throttle_read_bps_device, "rbps"));
  RETURN_IF_ERROR(throttle(io.throttle_write_bps_device, "wbps"));
  RETURN_IF_ERROR(throttle(io.throttle_read_iops_device, "riops"));
  return throttle(io.throttle_write_iops_device, "wiops");
}

Status Cgroup2::Apply(const oci::LinuxResources& r) {
  if (r.cpu) RETURN_IF_ERROR(ApplyCpu(*r.cpu));
  if (r.memory) RETURN_IF_ERROR(ApplyMemory(*r.memory));
  if (r.pids) RETURN_IF_ERROR(Write("pids.max", r.pids->limit > 0 ? std::to_string(r.pids->limit) : "max"));
  if (r.block_io) RETURN_IF_ERROR(ApplyBlockIO(*r.block_io));
  for (const auto& h : r.hugepage_limits)
    RETURN_IF_ERROR(Write("hugetlb." + h.page_size + ".max", std::to_string(h.limit)));
  for (const auto& [file, value] : r.unified) {
    if (file.empty() || file.find('/') != std::string::npos || file[0] == '.')
      return InvalidArgument("unified: invalid cgroup file name \"" + file + "\"");
    RETURN_IF_ERROR(Write(file, value));
  }
  if (!r.devices.empty())
    kCgroup2Log.Debug("cgroup {}: device rules not enforced (cgroup v2 needs eBPF; the VM is the boundary)", path_);
  return Status::Ok();
}

Result<UniqueFd> Cgroup2::OpenProcs() {
  const std::string p = path_ + "/cgroup.procs";
  UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + p);
  return fd;
}

Status Cgroup2::AddProcess(pid_t pid) { return Write("cgroup.procs", std::to_string(pid)); }

Result<std::vector<pid_t>> Cgroup2::Pids() {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path_ + "/cgroup.procs"));
  std::vector<pid_t> out;
  for (const std::string& w : SplitWords(text)) out.push_back(static_cast<pid_t>(std::stol(w)));
  return out;
}

Status Cgroup2::SignalAll(int signal) {
  if (signal == SIGKILL && PathExists(path_ + "/cgroup.kill")) return Write("cgroup.kill", "1");
  ASSIGN_OR_RETURN(std::vector<pid_t> pids, Pids());
  for (pid_t pid : pids) {
    if (::kill(pid, signal) != 0 && errno != ESRCH)
      return ErrnoStatus("kill(" + std::to_string(pid) + ", " + std::to_string(signal) + ")");
  }
  return Status::Ok();
}

Status Cgroup2::WaitEvent(const std::string& key, uint64_t want, std::chrono::milliseconds timeout) {
  const std::string p = path_ + "/cgroup.events";
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open " + p);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    char buf[256];
    ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
    if (n < 0) return ErrnoStatus("read " + p);
    auto v = EventValue(std::string_view(buf, static_cast<size_t>(n)), key);
    if (v && *v == want) return Status::Ok();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return DeadlineExceeded("cgroup " + path_ + ": " + key + " did not become " + std::to_string(want));
    // kernfs signals a change of cgroup.events with POLLPRI.
    pollfd pfd{fd.get(), POLLPRI, 0};
    (void)::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
}

Status Cgroup2::Freeze(bool frozen, std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(Write("cgroup.freeze", frozen ? "1" : "0"));
  return WaitEvent("frozen", frozen ? 1 : 0, timeout);
}

Result<CgroupMetrics> Cgroup2::Stats() {
  CgroupMetrics m;
  if (auto t = ReadIfExists(path_ + "/cpu.stat")) {
    auto kv = ParseFlatKeyed(*t);
    m.cpu = CgroupMetrics::Cpu{FlatValue(kv, "usage_usec"), FlatValue(kv, "user_usec"),
                               FlatValue(kv, "system_usec"), FlatValue(kv, "nr_periods"),
                               FlatValue(kv, "nr_throttled"), FlatValue(kv, "throttled_usec")};
  }
  if (auto cur = ReadIfExists(path_ + "/pids.current")) {
    m.pids = CgroupMetrics::Pids{ParseSingleValue(*cur).value_or(0),
                                 ParseSingleValue(ReadIfExists(path_ + "/pids.max").value_or("")).value_or(0)};
  }
  if (auto cur = ReadIfExists(path_ + "/memory.current")) {
    CgroupMetrics::Memory mem;
    mem.usage = ParseSingleValue(*cur).value_or(0);
    mem.usage_limit = ParseSingleValue(ReadIfExists(path_ + "/memory.max").value_or("")).value_or(0);
    mem.swap_usage = ParseSingleValue(ReadIfExists(path_ + "/memory.swap.current").value_or("")).value_or(0);
    mem.swap_limit = ParseSingleValue(ReadIfExists(path_ + "/memory.swap.max").value_or("")).value_or(0);
    mem.stat = ParseFlatKeyed(ReadIfExists(path_ + "/memory.stat").value_or(""));
    m.memory = std::move(mem);
  }
  if (auto ev = ReadIfExists(path_ + "/memory.events")) {
    auto kv = ParseFlatKeyed(*ev);
    m.memory_events = CgroupMetrics::MemoryEvents{FlatValue(kv, "low"), FlatValue(kv, "high"), FlatValue(kv, "max"),
                                                  FlatValue(kv, "oom"), FlatValue(kv, "oom_kill")};
  }
  if (auto io = ReadIfExists(path_ + "/io.stat")) m.io = ParseIoStat(*io);
  return m;
}

uint64_t Cgroup2::OomKillCount() {
  auto ev = ReadIfExists(path_ + "/memory.events");
  return ev ? EventValue(*ev, "oom_kill").value_or(0) : 0;
}

std::string Cgroup2::MemoryEventsPath() const {
  std::string p = path_ + "/memory.events";
  return PathExists(p) ? p : "";
}

Status Cgroup2::Destroy(std::chrono::milliseconds timeout) {
  if (!PathExists(path_)) return Status::Ok();
  RETURN_IF_ERROR_CTX(WaitEvent("populated", 0, timeout), "destroy cgroup");
  // rmdir can still see EBUSY briefly while exited tasks are released.
  int err = 0;  // of the last try; anything but EBUSY ends the wait
  const bool settled = WaitUntil(
      [&] {
        err = ::rmdir(path_.c_str()) == 0 ? 0 : errno;
        return err != EBUSY;
      },
      timeout, {std::chrono::milliseconds(1), std::chrono::milliseconds(1)});
  if (!settled || (err != 0 && err != ENOENT)) return ErrnoStatus("rmdir " + path_, err);
  for (const std::string& dir : created_parents_) {
    if (::rmdir(dir.c_str()) != 0) break;  // still used by a sibling: keep it and its parents
  }
  return Status::Ok();
}

}  // namespace

Result<CgroupManagerPtr> Cgroup2Manager::Open(const std::string& root) {
  struct statfs st{};
  if (::statfs(root.c_str(), &st) != 0) return ErrnoStatus("statfs cgroup root " + root);
  if (st.f_type != CGROUP2_SUPER_MAGIC) return InvalidArgument("cgroup root " + root + " is not a cgroup2 mount");
  return CgroupManagerPtr(new Cgroup2Manager(root));
}

std::vector<std::string> Cgroup2Manager::AvailableControllers() const {
  return SplitWords(ReadIfExists(root_ + "/cgroup.controllers").value_or(""));
}

void Cgroup2Manager::EnableControllers(const std::string& dir) const {
  std::vector<std::string> offered = SplitWords(ReadIfExists(dir + "/cgroup.controllers").value_or(""));
  std::vector<std::string> enabled = SplitWords(ReadIfExists(dir + "/cgroup.subtree_control").value_or(""));
  for (const char* want : kWantedControllers) {
    bool has = std::find(offered.begin(), offered.end(), want) != offered.end();
    bool on = std::find(enabled.begin(), enabled.end(), want) != enabled.end();
    if (!has || on) continue;
    Status st = WriteCgroupFile(dir, "cgroup.subtree_control", std::string("+") + want);
    if (!st.ok()) kCgroup2Log.Warn("cgroup {}: cannot enable controller {}: {}", dir, want, st.message());
  }
}

Result<CgroupPtr> Cgroup2Manager::Create(const std::string& relative_path) {
  if (relative_path.empty()) return InvalidArgument("cgroup path is empty");
  std::string dir = root_;
  std::vector<std::string> created;
  size_t pos = 0;
  while (pos < relative_path.size()) {
    size_t slash = relative_path.find('/', pos);
    std::string part = relative_path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    pos = slash == std::string::npos ? relative_path.size() : slash + 1;
    if (part.empty()) continue;
    EnableControllers(dir);
    dir += "/" + part;
    const bool leaf = pos >= relative_path.size();
    if (::mkdir(dir.c_str(), 0755) == 0) {
      if (!leaf) created.insert(created.begin(), dir);
    } else if (errno != EEXIST || leaf) {
      Status st = ErrnoStatus("mkdir cgroup " + dir);
      for (const auto& c : created) ::rmdir(c.c_str());
      return st;
    }
  }
  return CgroupPtr(new Cgroup2(dir, std::move(created)));
}

Result<std::string> ResolveCgroupPath(const std::string& cgroups_path, const std::string& parent,
                                      const std::string& container_id) {
  std::string p = cgroups_path;
  if (p.empty()) {
    p = parent.empty() ? container_id : parent + "/" + container_id;
  } else if (p[0] != '/' && std::count(p.begin(), p.end(), ':') == 2) {
    // systemd driver form "slice:prefix:name"; the guest has no systemd.
    size_t a = p.find(':'), b = p.find(':', a + 1);
    std::string slice = p.substr(0, a), prefix = p.substr(a + 1, b - a - 1), name = p.substr(b + 1);
    p = (slice.empty() ? parent : slice) + "/" + (prefix.empty() ? name : prefix + "-" + name) + ".scope";
  }
  while (!p.empty() && p[0] == '/') p.erase(0, 1);
  std::istringstream in(p);
  std::string part;
  while (std::getline(in, part, '/')) {
    if (part == ".." || part == ".")
      return InvalidArgument("linux.cgroupsPath: must not contain \".\" or \"..\": \"" + cgroups_path + "\"");
  }
  if (p.empty()) return InvalidArgument("linux.cgroupsPath: resolves to the cgroup root");
  return p;
}

}  // namespace capsule::engine
