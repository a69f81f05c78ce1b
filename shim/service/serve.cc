// The daemon's serve hook: config, event publisher, TaskManager and the
// ttrpc server, then wait for the shutdown request and tear down in the
// order that lets every blocked call return (VMs first, then the server,
// then the event queue).
#include <unistd.h>

#include <sstream>

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

const log::Logger kLog("shim.serve");

void LogConfig(const LoadedConfig& c) {
  if (!c.error.ok()) {
    kLog.Error("configuration: {}; every task will fail until it is fixed", c.error.ToString());
    return;
  }
  kLog.Info("effective configuration (from {}):", c.path.empty() ? "built-in defaults" : c.path);
  std::istringstream lines(config::ToYaml(c.config));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) kLog.Info("  {}", line);
  }
}

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
  kLog.Info("events go to {}", sender->Describe());
  events::QueuedPublisher publisher(ctx.ns, std::move(sender));
  mount::LinuxMounter mounter;
  task::VmProviderPtr vms = make_vms(cfg.config);

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

  const std::string why = ctx.shutdown->Wait();
  kLog.Info("shutting down: {}", why);
  tasks.StopAll();
  server.Shutdown();
  publisher.Close(kEventFlushTimeout);
  return Status::Ok();
}

}  // namespace capsule::shim::service
