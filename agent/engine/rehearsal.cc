// See rehearsal.h.
#include "agent/engine/rehearsal.h"

#include <sys/mount.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/elapsed.h"
#include "runtime/common/file_util.h"
#include "runtime/oci/spec_parser.h"

namespace capsule::engine {
namespace {

// The rootfs: a read-only, non-recursive bind of / (the agent's binary and
// its libraries), gone again when this goes out of scope.
class RehearsalRoot {
 public:
  static Result<RehearsalRoot> Make(const std::string& dir) {
    RETURN_IF_ERROR(MkdirAll(dir, 0700));
    if (::mount("/", dir.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      Status st = ErrnoStatus("bind / on " + dir);
      (void)::rmdir(dir.c_str());
      return st;
    }
    RehearsalRoot root(dir);
    if (::mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
      return ErrnoStatus("remount " + dir + " read-only");
    return root;
  }
  RehearsalRoot(RehearsalRoot&& o) noexcept : dir_(std::move(o.dir_)) { o.dir_.clear(); }
  RehearsalRoot& operator=(RehearsalRoot&&) = delete;
  ~RehearsalRoot() {
    if (dir_.empty()) return;
    (void)::umount2(dir_.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    (void)::rmdir(dir_.c_str());
  }

 private:
  explicit RehearsalRoot(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace

std::string RehearsalSpecJson(const std::string& exe, const std::string& root) {
  using nlohmann::json;
  const json caps = {"CAP_CHOWN",  "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
                     "CAP_MKNOD",  "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
                     "CAP_SETFCAP", "CAP_SETPCAP",     "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
                     "CAP_KILL",   "CAP_AUDIT_WRITE"};
  auto mount = [](const char* dest, const char* type, const char* source, json options) {
    return json{{"destination", dest}, {"type", type}, {"source", source}, {"options", std::move(options)}};
  };
  json spec = {
      {"ociVersion", "1.0.2-dev"},
      {"annotations", {{"io.kubernetes.cri.container-type", "container"}}},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"args", {exe, std::string(kRehearsalArg)}},
        {"env", {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
        {"cwd", "/"},
        {"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}},
        {"noNewPrivileges", false}}},
      {"root", {{"path", root}, {"readonly", true}}},
      {"hostname", "rehearsal"},
      {"mounts",
       {mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}),
        mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}),
        mount("/dev/pts", "devpts", "devpts", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}),
        mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}),
        mount("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}),
        mount("/sys/fs/cgroup", "cgroup", "cgroup", {"nosuid", "noexec", "nodev", "relatime", "ro"}),
        mount("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"})}},
      {"linux",
       {{"namespaces", {{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}}},
        {"resources", {{"devices", {{{"allow", false}, {"access", "rwm"}}}}}},
        {"maskedPaths",
         {"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
          "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}},
        {"readonlyPaths",
         {"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}}}};
  return spec.dump();
}

Result<double> Rehearse(ContainerManager& engine, const std::string& exe, std::chrono::milliseconds timeout) {
  if (exe.empty()) return FailedPrecondition("rehearsal: no agent binary to run");
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(RehearsalRoot root, RehearsalRoot::Make(kRehearsalRoot));
  auto spec = oci::ParseSpec(RehearsalSpecJson(exe, kRehearsalRoot));
  if (!spec.ok()) return std::move(spec).status().WithContext("rehearsal spec");
  ASSIGN_OR_RETURN(ContainerPtr c, engine.Create(kRehearsalId, *spec, CreateOptions{}));
  Status run = [&]() -> Status {
    RETURN_IF_ERROR_CTX(c->Start().status(), "start");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    ASSIGN_OR_RETURN(ExitInfo exit,
                     c->Wait("", CancelCheck([deadline] { return std::chrono::steady_clock::now() > deadline; })));
    if (exit.status != 0) return Internal(fmt::format("its process exited with status {}", exit.status));
    return Status::Ok();
  }();
  Status removed = engine.Remove(kRehearsalId, timeout);
  RETURN_IF_ERROR_CTX(run, "rehearsal");
  RETURN_IF_ERROR_CTX(removed, "rehearsal: remove its container");
  return MsSince(start);
}

}  // namespace capsule::engine
