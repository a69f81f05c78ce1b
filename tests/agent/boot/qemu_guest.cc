// QEMU's serial port goes to a pipe we poll, so waiting for a console line
// is waiting for an event, not sleeping. QMP is line-based JSON on a unix
// socket; the few replies needed are checked for "return" without a parser.
#include "tests/agent/boot/qemu_guest.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "runtime/wire/guest_abi.h"

namespace capsule::agent::testing {
namespace {

std::string BuildDir() {
  const char* b = std::getenv("CAPSULE_BUILD_DIR");
  return b ? b : ".";
}

Result<std::string> FindQemu() {
  for (const char* p : {"/usr/bin/qemu-system-x86_64", "/usr/local/bin/qemu-system-x86_64"}) {
    if (::access(p, X_OK) == 0) return std::string(p);
  }
  return NotFound("qemu-system-x86_64 not found (apt-get install qemu-system-x86)");
}

}  // namespace

Result<std::unique_ptr<QemuGuest>> QemuGuest::Boot(const GuestBootOptions& o) {
  ASSIGN_OR_RETURN(std::string qemu, FindQemu());
  ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("guest-boot"));
  std::string kernel = o.kernel.empty() ? BuildDir() + "/deploy/vmlinuz" : o.kernel;
  std::string initrd = o.initrd.empty() ? BuildDir() + "/deploy/capsule-initrd.img" : o.initrd;
  std::string append(guest_abi::kBaseKernelCmdline);
  if (!o.extra_append.empty()) append += " " + o.extra_append;
  std::vector<std::string> argv = {
      qemu, "-M", "q35", "-accel", "tcg", "-cpu", "max", "-m", std::to_string(o.memory_mib), "-nodefaults",
      "-no-user-config", "-display", "none", "-no-reboot", "-kernel", kernel, "-initrd", initrd, "-append", append,
      "-serial", "stdio", "-monitor", "none", "-qmp", "unix:" + dir.Join("qmp.sock") + ",server=on,wait=off",
      "-object", fmt::format("memory-backend-memfd,id=mem,size={}M,share=on", o.memory_mib), "-numa",
      "node,memdev=mem", "-smp", std::to_string(o.vcpus)};
  if (!o.agent_token.empty())
    argv.insert(argv.end(), {"-fw_cfg", fmt::format("name={},string={}", guest_abi::kAgentTokenFwCfgName, o.agent_token)});
  argv.insert(argv.end(), o.extra_qemu_args.begin(), o.extra_qemu_args.end());
  auto guest = std::make_unique<QemuGuest>(std::move(dir), std::move(argv));
  RETURN_IF_ERROR(guest->Start());
  return guest;
}

Status QemuGuest::Start() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe2 for the serial console");
  console_fd_.reset(p[0]);
  UniqueFd write_end(p[1]);
  SpawnOptions so;
  so.argv = argv_;
  so.stdout_fd = write_end.get();
  so.stderr_fd = STDERR_FILENO;
  so.die_with_parent = true;
  started_ = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(so));
  qemu_.emplace(std::move(child));
  return Status::Ok();
}

std::string QemuGuest::CommandLine() const {
  std::string out;
  for (const auto& a : argv_) {
    bool quote = a.find(' ') != std::string::npos;
    out += (out.empty() ? "" : " ") + (quote ? "'" + a + "'" : a);
  }
  return out;
}

Status QemuGuest::ReadSome(int timeout_ms) {
  pollfd p{console_fd_.get(), POLLIN, 0};
  int r = ::poll(&p, 1, timeout_ms);
  if (r < 0 && errno != EINTR) return ErrnoStatus("poll serial console");
  if (r <= 0) return Status::Ok();
  char buf[4096];
  ssize_t n = ::read(console_fd_.get(), buf, sizeof buf);
  if (n < 0 && errno == EINTR) return Status::Ok();
  if (n <= 0) return Unavailable("QEMU closed the serial console");
  // The guest tty turns "\n" into "\r\n"; keep plain lines.
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] != '\r') console_.push_back(buf[i]);
  }
  arrivals_.emplace_back(std::chrono::steady_clock::now(), console_.size());
  return Status::Ok();
}

Result<std::string> QemuGuest::WaitForLine(std::string_view needle, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    size_t at = console_.find(needle);
    if (at != std::string::npos) {
      size_t nl = console_.find('\n', at);
      if (nl != std::string::npos) {
        size_t start = console_.rfind('\n', at);
        start = start == std::string::npos ? 0 : start + 1;
        return console_.substr(start, nl - start);
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return DeadlineExceeded(fmt::format("no console line with '{}' after {} ms; console:\n{}", needle,
                                          timeout.count(), console_));
    }
    Status st = ReadSome(static_cast<int>(left.count()));
    if (!st.ok()) return std::move(st).WithContext(fmt::format("waiting for '{}'; console:\n{}", needle, console_));
  }
}

std::optional<std::chrono::milliseconds> QemuGuest::ArrivalOf(std::string_view needle) const {
  size_t at = console_.find(needle);
  if (at == std::string::npos) return std::nullopt;
  for (const auto& [when, size] : arrivals_) {
    if (size > at) return std::chrono::duration_cast<std::chrono::milliseconds>(when - started_);
  }
  return std::nullopt;
}

Result<std::string> QemuGuest::Qmp(const std::string& command_json) {
  if (!qmp_) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = dir_.Join("qmp.sock");
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return ErrnoStatus("connect " + path);
    qmp_ = std::move(fd);
    ASSIGN_OR_RETURN(std::string greeting, Qmp(""));  // greeting, then capabilities
    ASSIGN_OR_RETURN(std::string caps, Qmp(R"({"execute":"qmp_capabilities"})"));
  }
  if (!command_json.empty()) {
    std::string line = command_json + "\n";
    if (::write(qmp_.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) return ErrnoStatus("write QMP");
  }
  // Replies and events are one JSON object per line; skip events.
  std::string reply;
  for (;;) {
    char c;
    ssize_t n = ::read(qmp_.get(), &c, 1);
    if (n <= 0) return Unavailable("QMP connection closed");
    if (c != '\n') {
      reply.push_back(c);
      continue;
    }
    if (reply.find("\"event\"") == std::string::npos) break;
    reply.clear();
  }
  if (reply.find("\"error\"") != std::string::npos) return Internal("QMP " + command_json + ": " + reply);
  return reply;
}

Status QemuGuest::SendCtrlAltDel() {
  return Qmp(R"({"execute":"send-key","arguments":{"keys":[{"type":"qcode","data":"ctrl"},)"
             R"({"type":"qcode","data":"alt"},{"type":"qcode","data":"delete"}]}})")
      .status();
}

Result<int> QemuGuest::WaitExit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  // Drain the console until QEMU closes it, then reap.
  while (std::chrono::steady_clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!ReadSome(static_cast<int>(left.count())).ok()) break;
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  ASSIGN_OR_RETURN(int status, qemu_->Wait(std::max(left, std::chrono::milliseconds(1))));
  return ExitCode(status);
}

}  // namespace capsule::agent::testing
