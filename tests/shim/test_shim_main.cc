// capsule-test-shimd: the real launcher (start/delete/daemon) with a
// trivial serve hook, so launcher tests can run whole shim processes
// without the Task service; capsule-test-shim starts it as
// containerd-shim-capsule-v2 starts capsule-shimd. Each connection sends one line:
//   "info" -> key=value lines describing the daemon (pid, sid, config, ...)
//   "exit" -> asks the daemon to shut down (as containerd's Shutdown would)
// The cleanup hook for `delete` reports the pid in <bundle>/test-vmm-pid.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "shim/launcher/launcher.h"

namespace {

using capsule::Status;
using capsule::UniqueFd;
using capsule::shim::launcher::DaemonContext;

std::string Info(const DaemonContext& ctx) {
  char cwd[4096] = "";
  (void)!::getcwd(cwd, sizeof cwd);
  return fmt::format(
      "pid={}\nsid={}\nppid={}\nns={}\nid={}\nbundle={}\naddress={}\nttrpc={}\nconfig={}\n"
      "socket={}\ncwd={}\ndebug={}\npublish={}\n",
      ::getpid(), ::getsid(0), ::getppid(), ctx.ns, ctx.id, ctx.bundle, ctx.containerd_address,
      ctx.ttrpc_address, ctx.config_path, ctx.socket_path, cwd, ctx.debug ? 1 : 0,
      ctx.publish_binary);
}

void Answer(const DaemonContext& ctx, int conn) {
  std::string line;
  char c;
  while (line.size() < 64 && ::read(conn, &c, 1) == 1 && c != '\n') line.push_back(c);
  std::string reply = line == "info" ? Info(ctx) : line == "exit" ? "bye\n" : "unknown\n";
  (void)!::write(conn, reply.data(), reply.size());
  if (line == "exit") ctx.shutdown->Request("exit command");
}

Status ServeLines(DaemonContext& ctx) {
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC));
  std::thread waiter([&] {
    ctx.shutdown->Wait();
    uint64_t one = 1;
    (void)!::write(wake.get(), &one, sizeof one);
  });
  while (!ctx.shutdown->requested()) {
    pollfd p[2] = {{ctx.listen_fd.get(), POLLIN, 0}, {wake.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[0].revents & POLLIN) {
      UniqueFd conn(::accept4(ctx.listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (conn) Answer(ctx, conn.get());
    }
  }
  ctx.shutdown->Request("serve loop ended");
  waiter.join();
  return Status::Ok();
}

capsule::Result<uint32_t> Cleanup(const capsule::shim::launcher::CleanupContext& ctx) {
  auto pid = capsule::ReadFile(ctx.bundle + "/test-vmm-pid");
  if (!pid.ok()) return 0u;
  return static_cast<uint32_t>(std::strtoul(pid->c_str(), nullptr, 10));
}

}  // namespace

int main(int argc, char** argv) {
  capsule::shim::launcher::Hooks hooks;
  hooks.serve = ServeLines;
  hooks.cleanup = Cleanup;
  return capsule::shim::launcher::Main(argc, argv, hooks);
}
