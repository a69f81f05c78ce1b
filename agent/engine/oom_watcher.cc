// cgroup v2 raises a "file modified" notification on memory.events when a
// counter changes (cgroup-v2.rst), which inotify reports as IN_MODIFY.
#include "agent/engine/oom_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agent/engine/cgroup_stats.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"

namespace capsule::engine {
namespace {

const log::Logger kOomWatcherLog("engine.oom");

uint64_t ReadOomKills(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? EventValue(*text, "oom_kill").value_or(0) : 0;
}

}  // namespace

Result<std::unique_ptr<OomWatcher>> OomWatcher::Create() {
  UniqueFd in(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!in) return ErrnoStatus("inotify_init1");
  UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop) return ErrnoStatus("eventfd");
  std::unique_ptr<OomWatcher> w(new OomWatcher(std::move(in), std::move(stop)));
  w->thread_ = std::thread([self = w.get()] { self->Loop(); });
  return w;
}

OomWatcher::~OomWatcher() {
  uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

Status OomWatcher::Watch(const std::string& id, const std::string& memory_events) {
  int wd = ::inotify_add_watch(inotify_.get(), memory_events.c_str(), IN_MODIFY);
  if (wd < 0) return ErrnoStatus("inotify_add_watch " + memory_events);
  std::lock_guard lock(mu_);
  watches_[wd] = Watched{id, memory_events, ReadOomKills(memory_events)};
  return Status::Ok();
}

void OomWatcher::Unwatch(const std::string& id) {
  std::lock_guard lock(mu_);
  for (auto it = watches_.begin(); it != watches_.end(); ++it) {
    if (it->second.id != id) continue;
    // One last look: an OOM kill right before removal still counts.
    uint64_t kills = ReadOomKills(it->second.path);
    if (kills > it->second.oom_kills) events_.push_back(id);
    ::inotify_rm_watch(inotify_.get(), it->first);
    watches_.erase(it);
    break;
  }
  cv_.notify_all();
}

std::optional<std::string> OomWatcher::Next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  std::string id = std::move(events_.front());
  events_.pop_front();
  return id;
}

void OomWatcher::Check(int wd) {
  std::lock_guard lock(mu_);
  auto it = watches_.find(wd);
  if (it == watches_.end()) return;
  uint64_t kills = ReadOomKills(it->second.path);
  if (kills <= it->second.oom_kills) return;
  kOomWatcherLog.Info("container {}: OOM kill (memory.events oom_kill {} -> {})", it->second.id, it->second.oom_kills,
                      kills);
  it->second.oom_kills = kills;
  events_.push_back(it->second.id);
  cv_.notify_all();
}

void OomWatcher::Loop() {
  alignas(inotify_event) char buf[4096];
  for (;;) {
    pollfd p[2] = {{inotify_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
    for (ssize_t off = 0; n > 0 && off < n;) {
      auto* ev = reinterpret_cast<inotify_event*>(buf + off);
      if (ev->mask & IN_MODIFY) Check(ev->wd);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
}

}  // namespace capsule::engine
