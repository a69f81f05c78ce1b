// Config generation, boot detection from containerd's log, ctr wrapper and
// leak scan for the private test containerd.
#include "tests/support/cri/mini_containerd.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

extern char** environ;

namespace capsule::testing {
namespace {

// containerd logs this once every plugin is up and the sockets serve.
constexpr const char* kBootedMarker = "containerd successfully booted";
constexpr std::chrono::milliseconds kStopGrace{10000};

std::string ConfigToml(const std::string& dir, const MiniContainerdOptions& o) {
  return fmt::format(R"(version = 2
root = "{0}/root"
state = "{0}/state"
# /opt/containerd is host-global: leave it alone.
disabled_plugins = ["io.containerd.internal.v1.opt"]

[grpc]
  address = "{0}/containerd.sock"
[ttrpc]
  address = "{0}/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{1}"
  # Root here lacks CAP_SYS_RESOURCE: never ask for a negative oom_score_adj.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{0}/cni"
{2}
)",
                     dir, o.sandbox_image, o.extra_config);
}

// Where containerd 1.6's CRI puts pod network namespaces (not configurable).
constexpr const char* kNetnsDir = "/var/run/netns";

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.emplace_back(e->d_name);
  }
  if (d != nullptr) ::closedir(d);
  return out;
}

std::string IpBinary() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "ip";
}

bool ReadAvailable(int fd, std::string* out, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (r <= 0) return r == 0;  // timeout: keep waiting
  char buf[8192];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n <= 0) return false;
  out->append(buf, static_cast<size_t>(n));
  return true;
}

}  // namespace

Result<CommandOutput> RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  UniqueFd r(p[0]), w(p[1]);
  SpawnOptions o;
  o.argv = argv;
  o.stdout_fd = w.get();
  o.stderr_fd = w.get();
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  w.reset();
  CommandOutput out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return DeadlineExceeded(fmt::format("{} still running after {} ms; output: {}", argv[0],
                                          timeout.count(), out.output));
    if (!ReadAvailable(r.get(), &out.output, left)) break;  // EOF
  }
  ASSIGN_OR_RETURN(int status, child.Wait(timeout));
  out.exit_code = ExitCode(status);
  return out;
}

MiniContainerd::MiniContainerd(TempDir dir, MiniContainerdOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {
  address_ = dir_.Join("containerd.sock");
  root_ = dir_.Join("root");
  state_ = dir_.Join("state");
}

Result<std::unique_ptr<MiniContainerd>> MiniContainerd::Start(MiniContainerdOptions options) {
  ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("minictrd"));
  RETURN_IF_ERROR(MkdirAll(dir.Join("cni")));
  RETURN_IF_ERROR(WriteFile(dir.Join("config.toml"), ConfigToml(dir.path(), options)));
  std::unique_ptr<MiniContainerd> c(new MiniContainerd(std::move(dir), std::move(options)));
  if (c->options_.cni) RETURN_IF_ERROR(c->WriteCniConfig());
  c->netns_before_ = DirEntries(kNetnsDir);
  RETURN_IF_ERROR(c->Boot());
  return c;
}

Status MiniContainerd::WriteCniConfig() {
  std::random_device rd;
  const uint32_t r = rd();
  CniNetwork net;
  net.bridge = fmt::format("capbr{:06x}", r & 0xffffff);
  const uint32_t second = 200 + (r >> 24) % 8, third = (r >> 8) & 0xff;
  net.subnet = fmt::format("10.{}.{}.0/24", second, third);
  net.gateway = fmt::format("10.{}.{}.1", second, third);
  const std::string conf = fmt::format(R"({{
  "cniVersion": "1.0.0",
  "name": "capsule-test",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "{0}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {{
        "type": "host-local",
        "dataDir": "{1}",
        "ranges": [[{{"subnet": "{2}", "gateway": "{3}"}}]],
        "routes": [{{"dst": "0.0.0.0/0"}}]
      }}
    }},
    {{"type": "loopback"}}
  ]
}}
)",
                                       net.bridge, dir_.Join("cni-ipam"), net.subnet, net.gateway);
  RETURN_IF_ERROR(WriteFile(dir_.Join("cni/10-capsule-test.conflist"), conf));
  cni_ = std::move(net);
  return Status::Ok();
}

Status MiniContainerd::Boot() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  UniqueFd log_r(p[0]), log_w(p[1]);
  SpawnOptions o;
  o.argv = {"/usr/bin/containerd", "--config", dir_.Join("config.toml"), "--log-level", "info"};
  o.stdout_fd = log_w.get();
  o.stderr_fd = log_w.get();
  o.die_with_parent = true;
  if (!options_.path_prepend.empty()) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "PATH=", 5) != 0) env.emplace_back(*e);
    }
    std::string path = "PATH=";
    for (const auto& d : options_.path_prepend) path += d + ":";
    const char* old = std::getenv("PATH");
    path += old != nullptr ? old : "/usr/sbin:/usr/bin:/sbin:/bin";
    env.push_back(path);
    o.env = std::move(env);
  }
  {
    std::lock_guard lock(mu_);
    booted_ = false;
    log_eof_ = false;
  }
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  child_.emplace(std::move(child));
  log_w.reset();
  log_thread_ = std::thread([this, fd = std::move(log_r)]() mutable { ReadLog(std::move(fd)); });
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, options_.boot_timeout, [&] { return booted_ || log_eof_; }) || !booted_) {
    lock.unlock();
    auto log = ReadFile(log_path());
    return Unavailable("containerd did not boot; log tail: " +
                       (log.ok() ? log->substr(log->size() > 4000 ? log->size() - 4000 : 0) : ""));
  }
  return Status::Ok();
}

void MiniContainerd::Stop() {
  if (child_ && !child_->reaped()) {
    (void)child_->Signal(SIGTERM);
    if (!child_->Wait(kStopGrace).ok()) (void)child_->Terminate(std::chrono::milliseconds(1000));
  }
  child_.reset();
  if (log_thread_.joinable()) log_thread_.join();
}

Status MiniContainerd::Restart() {
  Stop();
  return Boot();
}

void MiniContainerd::ReadLog(UniqueFd pipe) {
  UniqueFd file(::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  std::string pending;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(pipe.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    (void)!::write(file.get(), buf, static_cast<size_t>(n));
    pending.append(buf, static_cast<size_t>(n));
    if (pending.find(kBootedMarker) != std::string::npos) {
      {
        std::lock_guard lock(mu_);
        booted_ = true;
      }
      cv_.notify_all();
      pending.clear();
    } else if (pending.size() > 4096) {
      pending.erase(0, pending.size() - 256);
    }
  }
  {
    std::lock_guard lock(mu_);
    log_eof_ = true;
  }
  cv_.notify_all();
}

Result<std::string> MiniContainerd::Ctr(const std::vector<std::string>& args, const std::string& ns,
                                        std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {"/usr/bin/ctr", "--address", address_, "--namespace", ns};
  argv.insert(argv.end(), args.begin(), args.end());
  ASSIGN_OR_RETURN(CommandOutput out, RunCommand(argv, timeout));
  if (out.exit_code != 0) {
    std::string cmd;
    for (const auto& a : args) cmd += " " + a;
    return Internal(fmt::format("ctr{} exited {}: {}", cmd, out.exit_code, out.output));
  }
  return out.output;
}

Status MiniContainerd::ImportImage(const std::string& tar, const std::string& ns) {
  auto out = Ctr({"images", "import", tar}, ns);
  if (!out.ok()) return std::move(out).status().WithContext("import " + tar);
  return Status::Ok();
}

std::vector<std::string> MiniContainerd::Leaks() const {
  std::vector<std::string> leaks;
  // Shims: containerd passes its address on their command line.
  DIR* d = ::opendir("/proc");
  while (dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    if (!std::isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    const pid_t pid = std::atoi(e->d_name);
    if (child_ && pid == child_->pid()) continue;
    auto cmdline = ReadFile(fmt::format("/proc/{}/cmdline", pid));
    if (!cmdline.ok() || cmdline->find(address_) == std::string::npos) continue;
    std::replace(cmdline->begin(), cmdline->end(), '\0', ' ');
    leaks.push_back(fmt::format("process {}: {}", pid, *cmdline));
  }
  if (d != nullptr) ::closedir(d);
  // Mounts (rootfs overlays, sandbox shm) under our directories.
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    fields >> id >> parent >> devno >> root >> mount_point;
    if (mount_point.rfind(dir_.path() + "/", 0) == 0) leaks.push_back("mount " + mount_point);
  }
  if (cni_) {
    for (const auto& ns : DirEntries(kNetnsDir)) {
      if (ns.rfind("cni-", 0) == 0 &&
          std::find(netns_before_.begin(), netns_before_.end(), ns) == netns_before_.end())
        leaks.push_back(fmt::format("netns {}/{}", kNetnsDir, ns));
    }
    for (const auto& port : DirEntries(fmt::format("/sys/class/net/{}/brif", cni_->bridge)))
      leaks.push_back(fmt::format("port {} on bridge {}", port, cni_->bridge));
  }
  return leaks;
}

MiniContainerd::~MiniContainerd() {
  Stop();
  for (const std::string& leak : Leaks()) {
    if (leak.rfind("process ", 0) == 0) {
      ::kill(std::atoi(leak.c_str() + 8), SIGKILL);
    } else if (leak.rfind("mount ", 0) == 0) {
      ::umount2(leak.substr(6).c_str(), MNT_DETACH);
    } else if (leak.rfind("netns ", 0) == 0) {
      const std::string path = leak.substr(6);
      ::umount2(path.c_str(), MNT_DETACH);
      ::unlink(path.c_str());
    }
  }
  // The bridge plugin never deletes its bridge; the veths went with their
  // netns.
  if (cni_) (void)RunCommand({IpBinary(), "link", "del", cni_->bridge}, std::chrono::milliseconds(10000));
}

}  // namespace capsule::testing
