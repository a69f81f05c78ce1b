// The daemon's serve hook: config, event publisher, TaskManager and the
// ttrpc server, then wait for the shutdown request (containerd's Shutdown,
// a signal, or no task left for a while) and tear down in the order that
// lets every blocked call return (VMs and processes first, then the
// server, then the event queue), under a deadline.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/ttrpc/server.h"
#include "shim/events/queued_publisher.h"
#include "shim/events/senders.h"
#include "shim/mount/mounter.h"
#include "shim/service/daemon_hooks.h"
#include "shim/service/task_service.h"

namespace capsule::shim::service {
namespace {

const log::Logger kServeLog("shim.serve");

void LogConfig(const LoadedConfig& c) {
  if (!c.error.ok()) {
    kServeLog.Error("configuration: {}; every task will fail until it is fixed", c.error.ToString());
    return;
  }
  kServeLog.Info("effective configuration (from {}):", c.path.empty() ? "built-in defaults" : c.path);
  std::istringstream lines(config::ToYaml(c.config));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) kServeLog.Info("  {}", line);
  }
}

// Waits for a shutdown request; asks for one itself once the shim has had
// no task for long enough.
std::string WaitForShutdown(launcher::ShutdownSignal& shutdown, const task::TaskManager& tasks) {
  constexpr std::chrono::seconds kIdleCheck{1};
  while (!shutdown.WaitFor(kIdleCheck)) {
    const auto idle = tasks.IdleFor();
    if (!idle) continue;
    if (idle->shutdown_requested) {
      shutdown.Request("containerd's Shutdown came while a creation it gave up on was undone; it is undone now");
      continue;
    }
    const std::chrono::seconds limit = idle->had_task ? kIdleExitAfterLastTask : kIdleExitWithoutTask;
    if (idle->duration >= limit) {
      shutdown.Request(fmt::format("no task {} for {} s and no Shutdown from containerd",
                                   idle->had_task ? "left" : "was ever created", limit.count()));
    }
  }
  return shutdown.Wait();
}

// Ends the process if tear-down takes longer than kShutdownDeadline, after
// removing the socket so that containerd sees the shim gone (its `delete`
// then stops whatever VM is left).
class TeardownDeadline {
 public:
  explicit TeardownDeadline(std::string socket_path) : socket_path_(std::move(socket_path)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~TeardownDeadline() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Stage(const char* what) { stage_.store(what); }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, kShutdownDeadline, [this] { return done_; })) return;
    kServeLog.Error("shutdown stuck for {} s at: {}; exiting anyway", kShutdownDeadline.count(), stage_.load());
    if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
    ::_exit(2);
  }
  const std::string socket_path_;
  std::atomic<const char*> stage_{"start"};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

LoadedConfig LoadConfig(const std::string& path) {
  LoadedConfig out;
  const std::string file = path.empty() ? config::kDefaultPath : path;
  if (path.empty() && !PathExists(file)) return out;  // defaults
  auto loaded = config::LoadFile(file);
  if (!loaded.ok()) {
    out.error = std::move(loaded).status();
    return out;
  }
  out.config = std::move(*loaded);
  out.path = file;
  return out;
}

Status Serve(launcher::DaemonContext& ctx, const VmProviderFactory& make_vms) {
  LoadedConfig cfg = LoadConfig(ctx.config_path);
  if (cfg.error.ok() && !ctx.debug) log::SetLevel(cfg.config.runtime.log_level);
  LogConfig(cfg);

  ASSIGN_OR_RETURN(events::SenderPtr sender,
                   events::MakeSender(ctx.ttrpc_address, ctx.publish_binary, ctx.containerd_address));
  kServeLog.Info("events go to {}", sender->Describe());
  events::QueuedPublisher publisher(ctx.ns, std::move(sender));
  mount::LinuxMounter mounter;
  pod::VmProviderPtr vms = make_vms(cfg.config);

  task::TaskManagerDeps deps;
  deps.ns = ctx.ns;
  deps.config = cfg.config;
  deps.config_error = cfg.error;
  deps.config_path = ctx.config_path;
  deps.vms = vms.get();
  deps.mounter = &mounter;
  deps.events = &publisher;
  task::TaskManager tasks(std::move(deps));
  TaskService service(&tasks, &publisher, [&ctx](std::string why) { ctx.shutdown->Request(std::move(why)); });

  ttrpc::ServerOptions so;
  const uid_t self = ::geteuid();
  so.authorize_uid = [self](uid_t peer) { return peer == self; };  // containerd runs as our uid
  ttrpc::Server server(so);
  service.Register(server);
  RETURN_IF_ERROR_CTX(server.ListenFd(std::move(ctx.listen_fd)), "serve " + ctx.socket_path);

  const std::string why = WaitForShutdown(*ctx.shutdown, tasks);
  kServeLog.Info("shutting down: {}", why);
  TeardownDeadline deadline(ctx.socket_path);
  deadline.Stage("stopping VMs and ending every process's wait");
  tasks.StopAll();
  deadline.Stage("closing containerd's connections (a handler has not returned)");
  server.Shutdown();
  deadline.Stage("flushing events to containerd");
  publisher.Close(kEventFlushTimeout);
  return Status::Ok();
}

}  // namespace capsule::shim::service
